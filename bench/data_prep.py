"""Data preparation, ours against `datasets`' batched map, on the same generated JSONL corpus and the same tokenizer.

    .venv/bin/python bench/data_prep.py                      # a ~300 MB corpus, 3 alternating rounds, then memory
    .venv/bin/python bench/data_prep.py --size 40 --rounds 1
    .venv/bin/python bench/data_prep.py --baseline /tmp/before      # ours against another checkout's ours

The corpus: `--size` MB of JSONL text records ({"text": ...}, 50 to 400 words each, drawn Zipf-like from 20k
generated words), made once into --workdir and reused. The tokenizer: a byte-level BPE of 32k ids trained here with
`tokenizers` on the corpus's first 8 MB, saved as a Hugging Face fast tokenizer (PreTrainedTokenizerFast) with <s> and
</s>; both sides load it with AutoTokenizer.from_pretrained. No download.

Ours: the real entry point, `python -m trainer.stage --model tiny --tokenizer <it> --dataset <corpus> --data-cache-dir
<fresh> --data-workers W`, which streams the corpus into the cache (tokens.npy, trainable.npy). Theirs:
`datasets.load_dataset("json", ...)` (the corpus into Arrow) then `.map(batched=True, num_proc=W)` calling the tokenizer
on each batch of 1000 texts and adding <s> and </s>, with a fresh cache directory. A round compares the ids themselves,
not only their count: a BLAKE2b digest of each side's id stream in order (uint32, little-endian), taken after its timed
process has exited (ours from tokens.npy, theirs from map's Arrow cache files), and a round whose digests differ is
refused. Each side runs as its own process, timed from start to exit (imports included), its CPU time counted with its
waited-for children (os.wait4), its memory sampled every 50 ms over the whole process tree (children too): peak resident
set (RSS, which counts pages shared by forked workers once per process) and peak proportional set (PSS, each shared page
split between its sharers: the memory the tree really holds). A round runs both, the order alternating between rounds,
and their throughput ratio is the round's figure: on a machine shared with other work both saw the same load within a
few minutes. Then ours and theirs run once more on a corpus of a quarter of the size: peak memory against corpus size.

--baseline DIR puts ours as another checkout of the project makes it (DIR, for example `git archive <commit> | tar -x
-C DIR`, run with this virtual environment) in the place of `datasets`: a change's before and after, side by side.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MB = 1_000_000
VOCAB = 32_000
WORDS = 20_000
TRAIN_BYTES = 8 * MB
SAMPLE_S = 0.05
DIGEST_CHUNK = 1 << 24  # ids per update: the digest's memory stays bounded on a large corpus


@dataclass(frozen=True)
class Run:
    side: str
    corpus_bytes: int
    seconds: float
    cpu_seconds: float
    tokens: int
    peak_rss: int
    peak_pss: int
    digest: str

    @property
    def mb_per_s(self) -> float:
        return self.corpus_bytes / MB / self.seconds

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds


def words(count: int, rng: random.Random) -> list[str]:
    """Pronounceable pseudo-words of 1 to 4 syllables."""
    syllables = [c + v for c in "bcdfghjklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ai", "ou")]
    return ["".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(count)]


def make_corpus(path: Path, size_bytes: int, seed: int = 0) -> None:
    """JSONL text records up to `size_bytes`, deterministic for a seed; written to a temporary name, then renamed."""
    rng = random.Random(seed)
    vocabulary = words(WORDS, rng)
    weights = [1 / (rank + 1) for rank in range(WORDS)]  # Zipf's law, as words in text
    punctuation = [".", ",", "?", "!", ""]
    written = 0
    partial = path.with_suffix(".partial")
    with partial.open("w", encoding="utf-8") as out:
        while written < size_bytes:
            lines = []
            for _ in range(256):
                drawn = rng.choices(vocabulary, weights, k=rng.randint(50, 400))
                text = " ".join(w + rng.choice(punctuation) if i % 12 == 11 else w for i, w in enumerate(drawn))
                lines.append(json.dumps({"text": text.capitalize()}) + "\n")
            chunk = "".join(lines)
            out.write(chunk)
            written += len(chunk.encode())
    partial.rename(path)


def make_tokenizer(corpus: Path, directory: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    def texts() -> list[str]:
        read, sample = 0, []
        with corpus.open(encoding="utf-8") as lines:
            for line in lines:
                sample.append(json.loads(line)["text"])
                read += len(line)
                if read > TRAIN_BYTES:
                    break
        return sample

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.train_from_iterator(texts(), trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<s>", "</s>"]))
    PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>").save_pretrained(directory)


def ids_digest(streams: Iterable[np.ndarray]) -> str:
    """BLAKE2b of the ids in order, as little-endian uint32 bytes: equal for two sides exactly when they made the same
    ids in the same order (their count alone matches a stream whose ids differ)."""
    digest = hashlib.blake2b(digest_size=16)
    for stream in streams:
        for start in range(0, len(stream), DIGEST_CHUNK):
            digest.update(np.ascontiguousarray(stream[start : start + DIGEST_CHUNK], dtype="<u4").tobytes())
    return digest.hexdigest()


def ours_digest(entry: Path) -> str:
    """The digest of a cache entry's tokens.npy (mapped, not read into memory)."""
    return ids_digest([np.load(entry / "tokens.npy", mmap_mode="r")])


def arrow_digest(cache_files: list[str], column: str = "input_ids") -> str:
    """The digest of a list column's ids across map's Arrow cache files, in the files' (the shards') order."""
    from datasets import Dataset

    def streams() -> Iterator[np.ndarray]:
        for filename in cache_files:
            for chunk in Dataset.from_file(filename).data.column(column).chunks:
                yield chunk.flatten().to_numpy()  # flatten honours a sliced chunk's offsets, .values would not

    return ids_digest(streams())


def same_ids(results: dict[str, Run]) -> None:
    """Refuses a round whose two sides made different ids: their figures would not compare the same work."""
    first, second = results.values()
    if (first.tokens, first.digest) != (second.tokens, second.digest):
        raise RuntimeError(
            f"{first.side} made {first.tokens} ids (blake2b {first.digest}), "
            f"{second.side} {second.tokens} (blake2b {second.digest}): not the same ids, the round is void"
        )


def descendants(pid: int) -> list[int]:
    """The process and every process below it (/proc/<pid>/task/<tid>/children)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                queue += [int(c) for c in Path(f"/proc/{current}/task/{task}/children").read_text().split()]
        except OSError:
            continue
    return found


def memory_kib(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in KiB, from smaps_rollup; (0, 0) for a process that has gone."""
    rss = pss = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1])
            elif line.startswith("Pss:"):
                pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


def run_measured(command: list[str], env: dict[str, str], cwd: Path = ROOT) -> tuple[float, float, int, int, str]:
    """(wall s, CPU s with children, peak tree RSS bytes, peak tree PSS bytes, stdout) of one command."""
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(command, env=env, cwd=cwd, stdout=stdout, stderr=stderr, text=True)
        peaks = [0, 0]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                for index, total in enumerate(map(sum, zip(*map(memory_kib, descendants(process.pid)), strict=True))):
                    peaks[index] = max(peaks[index], total)
                done.wait(SAMPLE_S)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(process.pid, 0)  # the CPU time of the process and its waited-for children
        seconds = time.perf_counter() - started
        done.set()
        sampler.join()
        process.returncode = os.waitstatus_to_exitcode(status)
        stdout.seek(0)
        stderr.seek(0)
        if process.returncode != 0:
            raise RuntimeError(f"{command[:4]} exited {process.returncode}:\n{stderr.read()[-3000:]}")
        return seconds, usage.ru_utime + usage.ru_stime, peaks[0] * 1024, peaks[1] * 1024, stdout.read()


def ours(corpus: Path, tokenizer: Path, workers: int, scratch: Path, root: Path = ROOT, side: str = "ours") -> Run:
    """`python -m trainer.stage` of the checkout at `root` (its directory first on the module path)."""
    cache = Path(tempfile.mkdtemp(dir=scratch, prefix="ours-"))
    command = [sys.executable, "-m", "trainer.stage", "--model", "tiny", "--tokenizer", str(tokenizer),
               "--dataset", str(corpus), "--dataset-format", "text", "--data-cache-dir", str(cache),
               "--data-workers", str(workers)]  # fmt: skip
    try:
        seconds, cpu, rss, pss, _ = run_measured(command, os.environ | {"HF_HUB_OFFLINE": "1"}, root)
        (meta,) = cache.glob("*/meta.json")
        tokens = json.loads(meta.read_text())["tokens"]
        digest = ours_digest(meta.parent)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return Run(side, corpus.stat().st_size, seconds, cpu, tokens, rss, pss, digest)


def theirs(corpus: Path, tokenizer: Path, workers: int, scratch: Path) -> Run:
    cache = Path(tempfile.mkdtemp(dir=scratch, prefix="datasets-"))
    command = [sys.executable, __file__, "--datasets-side", str(corpus), str(tokenizer), str(cache), str(workers)]
    env = os.environ | {"HF_HUB_OFFLINE": "1", "HF_DATASETS_CACHE": str(cache)}
    try:
        seconds, cpu, rss, pss, stdout = run_measured(command, env)
        reported = json.loads(stdout.strip().splitlines()[-1])
        digest = arrow_digest(reported["cache_files"])  # after the timed process: not in its time or memory
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return Run("datasets", corpus.stat().st_size, seconds, cpu, reported["tokens"], rss, pss, digest)


def datasets_side(corpus: str, tokenizer_dir: str, cache: str, workers: int) -> None:
    """What a `datasets` user writes: load the JSON into Arrow, map the tokenizer over batches with worker processes."""
    import datasets
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id

    def tokenise(batch: dict[str, list[str]]) -> dict[str, list[list[int]]]:
        encoded = tokenizer(batch["text"], add_special_tokens=False, return_attention_mask=False)["input_ids"]
        return {"input_ids": [[bos, *ids, eos] for ids in encoded]}

    loaded: Any = datasets.load_dataset("json", data_files=corpus, split="train", cache_dir=cache)
    mapped: Any = loaded.map(tokenise, batched=True, num_proc=workers, remove_columns=["text"])
    # Counted in Arrow, from the lists' lengths: reading the ids back as Python lists would add to this side's time
    # and memory a pass that ours does not make (about 5% of the time and 50 MiB on a 20 MB corpus).
    tokens = sum(int(chunk.value_lengths().to_numpy().sum()) for chunk in mapped.data.column("input_ids").chunks)
    # The ids are compared by the bench from map's cache files once this process has exited.
    print(json.dumps({"tokens": tokens, "cache_files": [f["filename"] for f in mapped.cache_files]}))


def row(run: Run) -> str:
    return (f"| {run.side} | {run.corpus_bytes / MB:.0f} | {run.seconds:.1f} | {run.mb_per_s:.2f} | "
            f"{run.tokens_per_s / 1e6:.2f} | {run.cpu_seconds:.0f} | {run.peak_rss / 2**20:.0f} | "
            f"{run.peak_pss / 2**20:.0f} |")  # fmt: skip


HEADER = (
    "| side | corpus MB | wall s | MB/s | M tokens/s | CPU s | peak RSS MiB (tree) | peak PSS MiB (tree) |\n"
    "|---|---|---|---|---|---|---|---|"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--size", type=float, default=300, help="corpus size in MB (default 300)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="our --data-workers and datasets' num_proc")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "fsdp-eks-data-prep")
    parser.add_argument("--no-memory-sizes", action="store_true", help="skip the quarter-size runs")
    parser.add_argument("--baseline", type=Path, help="another checkout whose ours takes datasets' place")
    parser.add_argument("--datasets-side", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.datasets_side:
        corpus, tokenizer_dir, cache, workers = args.datasets_side
        datasets_side(corpus, tokenizer_dir, cache, int(workers))
        return 0
    args.workdir.mkdir(parents=True, exist_ok=True)
    sizes = [args.size] if args.no_memory_sizes else [args.size, args.size / 4]
    corpora = {size: args.workdir / f"corpus-{size:g}MB.jsonl" for size in sizes}
    for size, corpus in corpora.items():
        if not corpus.exists():
            make_corpus(corpus, int(size * MB))
    tokenizer = args.workdir / f"bpe-{VOCAB}"
    if not (tokenizer / "tokenizer.json").exists():
        make_tokenizer(corpora[args.size], tokenizer)
    print(f"corpus {corpora[args.size]} ({corpora[args.size].stat().st_size / MB:.0f} MB), tokenizer {tokenizer}, "
          f"{args.workers} workers, {len(os.sched_getaffinity(0))} CPUs")  # fmt: skip
    other = functools.partial(ours, root=args.baseline.resolve(), side="baseline") if args.baseline else theirs
    other_name = "baseline" if args.baseline else "datasets"
    print(HEADER)
    ratios, runs = [], []
    for round_index in range(args.rounds):
        sides = [ours, other] if round_index % 2 == 0 else [other, ours]
        results = {}
        for side in sides:
            run = side(corpora[args.size], tokenizer, args.workers, args.workdir)
            results[run.side] = run
            runs.append(run)
            print(row(run), flush=True)
        same_ids(results)
        ratios.append(results["ours"].mb_per_s / results[other_name].mb_per_s)
        print(f"round {round_index + 1}: ours / {other_name} throughput {ratios[-1]:.2f}, both made the same "
              f"{results['ours'].tokens} ids (blake2b {results['ours'].digest})", flush=True)  # fmt: skip
    print(f"\nmedian throughput ratio ours / {other_name} over {len(ratios)} rounds: {statistics.median(ratios):.2f} "
          f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)})")  # fmt: skip
    if not args.no_memory_sizes:
        print("\npeak memory against corpus size\n" + HEADER)
        smalls: dict[str, Run] = {}
        for side in (ours, other):
            small = side(corpora[args.size / 4], tokenizer, args.workers, args.workdir)
            smalls[small.side] = small
            full = max((r for r in runs if r.side == small.side), key=lambda r: r.peak_pss)
            print(row(small))
            print(row(full))
        same_ids(smalls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
