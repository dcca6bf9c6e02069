"""Streaming data preparation (trainer/data/records.py, tokenise.py, prepare.py, cache.py): the same tokens and masks
as the record-at-a-time pipeline it replaced, for every format, through batches, worker processes and the cache
files; memory held by the batches in flight, not by the corpus."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trainer.data.records as records_module
import trainer.data.tokenise as tokenise_module
from local.procs import Proc, alive, process_tree, signal_all
from stack.paths import PROJECT_ROOT
from tests.trainer.worker_probes import KILL_TEXT, ForkerTokenizer, KilledAtATextTokenizer, thread_count
from trainer.base.errors import InputError
from trainer.base.flags.config import DataConfig, ValidationConfig
from trainer.data.cache import build_entry, build_split_entries, map_entry
from trainer.data.packing import build_packed_data, build_splits, pack
from trainer.data.prepare import EntryFiles, NpyAppender, prepare
from trainer.data.records import json_array_records, record_batches, text_documents
from trainer.data.tokenizer import HFTokenizer, Tokenizer
from trainer.data.tokenizer_bytes import ByteTokenizer

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
WORDS = ["the", "model", "learns", "naïve", "café", "x", "7", "+", "=", "über", "日本", "data", "a", "b", "...", "\n"]


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12)))


def generated(data_format: str, count: int, seed: int = 0) -> list[dict[str, Any]]:
    """Records of a format with varied content: empty fields, unicode, newlines."""
    rng = random.Random(seed)
    if data_format == "text":
        return [{"text": sentence(rng)} for _ in range(count)]
    if data_format == "instruction":
        return [
            {
                "instruction": sentence(rng),
                "input": sentence(rng) if rng.random() < 0.5 else "",
                "output": sentence(rng),
            }
            for _ in range(count)
        ]
    if data_format == "dialogsum":
        return [{"dialogue": f"#Person1#: {sentence(rng)}\n#Person2#: {sentence(rng)}", "summary": sentence(rng)}
                for _ in range(count)]  # fmt: skip
    turns = [
        [{"role": "system", "content": sentence(rng)}] * (rng.random() < 0.3)
        + [{"role": role, "content": sentence(rng)} for _ in range(rng.randint(1, 3)) for role in ("user", "assistant")]
        for _ in range(count)
    ]
    return [{"messages": conversation} for conversation in turns]


@pytest.fixture(scope="module")
def bpe(tmp_path_factory: pytest.TempPathFactory) -> HFTokenizer:
    """A byte-level BPE trained here on the generated text (no download), with ChatML's special tokens and
    template, loaded as the trainer loads any tokenizer."""
    from tokenizers import Tokenizer as Backend
    from tokenizers import decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Backend(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|im_start|>", "<|im_end|>"])
    rng = random.Random(1)
    backend.train_from_iterator((sentence(rng) for _ in range(2000)), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<|im_start|>", eos_token="<|im_end|>")
    fast.chat_template = CHATML
    directory = tmp_path_factory.mktemp("bpe")
    fast.save_pretrained(directory)
    return HFTokenizer(str(directory))


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def assert_same_stream(new: Any, old: Any) -> None:
    assert new.tokens.dtype == np.uint32
    assert new.tokens.tolist() == old.tokens.tolist()
    assert new.trainable.tolist() == old.trainable.tolist()
    assert new.record_lengths.tolist() == old.record_lengths.tolist()


@pytest.fixture
def small_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of a few records and reads of a few characters: every corpus here spans many of each."""
    monkeypatch.setattr(records_module, "BATCH_RECORDS", 7)
    monkeypatch.setattr(records_module, "BATCH_BYTES", 300)
    monkeypatch.setattr(records_module, "READ_CHARS", 5)


@pytest.mark.parametrize("data_format", ["text", "instruction", "dialogsum", "chat"])
def test_every_format_gives_the_record_at_a_time_tokens_and_mask(
    data_format: str, bpe: HFTokenizer, tmp_path: Path, small_buffers: None
) -> None:
    rows = generated(data_format, 60)
    config = DataConfig(dataset=str(write_jsonl(tmp_path / "data.jsonl", rows)), seq_len=8, workers=1)
    tokenizers: list[Tokenizer] = [bpe] if data_format == "chat" else [bpe, ByteTokenizer()]
    for tokenizer in tokenizers:
        assert_same_stream(build_packed_data(config, tokenizer), pack(rows, tokenizer, data_format, 8))


def test_two_worker_processes_give_the_same_stream_and_split(
    bpe: HFTokenizer, tmp_path: Path, small_buffers: None
) -> None:
    rows = generated("chat", 120, seed=3)
    config = DataConfig(dataset=str(write_jsonl(tmp_path / "chat.jsonl", rows)), seq_len=8, workers=2)
    assert_same_stream(build_packed_data(config, bpe), pack(rows, bpe, "chat", 8))
    splits = build_splits(config, ValidationConfig(split=0.25), bpe)
    alone = build_splits(DataConfig(dataset=config.dataset, seq_len=8, workers=1), ValidationConfig(split=0.25), bpe)
    assert splits.val is not None and alone.val is not None
    assert_same_stream(splits.train, alone.train)
    assert_same_stream(splits.val, alone.val)


def test_the_pool_reads_ahead_a_bounded_window_of_batches(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """However long the corpus, at most IN_FLIGHT_PER_WORKER batches per worker are read before their ids are
    taken (Pool.imap would read them all)."""
    monkeypatch.setattr(records_module, "BATCH_RECORDS", 4)
    config = DataConfig(dataset=str(write_jsonl(tmp_path / "d.jsonl", generated("text", 400))), seq_len=8)
    recipe = tokenise_module.Recipe(ByteTokenizer(), "text")
    read = taken = ahead = 0

    def counted() -> Iterator[records_module.RecordBatch]:
        nonlocal read, ahead
        for batch in record_batches(config):
            read += 1
            ahead = max(ahead, read - taken)
            yield batch

    for _ in tokenise_module.tokenised(counted(), recipe, workers=2):
        taken += 1
    assert read == taken == 100
    assert ahead <= tokenise_module.IN_FLIGHT_PER_WORKER * 2 + 1


def test_a_corpus_larger_than_the_buffers_is_cached_as_the_old_path_made_it(
    bpe: HFTokenizer, tmp_path: Path, small_buffers: None
) -> None:
    rows = generated("instruction", 300, seed=5)
    config = DataConfig(dataset=str(write_jsonl(tmp_path / "d.jsonl", rows)), seq_len=8, workers=2)
    entry = build_entry(config, bpe, tmp_path / "cache")
    assert np.load(entry / "tokens.npy").dtype == np.uint32  # 4 bytes an id: vocabularies reach 152k
    assert_same_stream(map_entry(entry, 8), pack(rows, bpe, "instruction", 8))
    train, val = build_split_entries(config, ValidationConfig(split=0.3), bpe, tmp_path / "cache")
    assert val is not None
    expected = build_splits(config, ValidationConfig(split=0.3), bpe)
    assert expected.val is not None
    assert_same_stream(map_entry(train, 8), expected.train)
    assert_same_stream(map_entry(val, 8), expected.val)


def test_json_arrays_and_text_files_stream_as_a_whole_file_parse_reads_them(
    tmp_path: Path, small_buffers: None
) -> None:
    tricky = [{"text": 'a "quoted" ], {comma}, \\ and \u2028 line'}, {"text": "x", "nested": [1, [2, {"y": "]"}]]},
              {"text": ""}, {"text": "日本 " * 20}]  # fmt: skip
    array = tmp_path / "d.json"
    array.write_text(" [\n" + " ,\n\t".join(json.dumps(row, ensure_ascii=False) for row in tricky) + "\n] \n")
    assert list(json_array_records(array, "--dataset d.json")) == json.loads(array.read_text())
    empty = tmp_path / "empty.json"
    empty.write_text(" [ ] ")
    assert list(json_array_records(empty, "--dataset empty.json")) == []
    refusals = [
        ("[{}, {]", "not valid JSON"),
        ('{"text": "x"}', "expected JSON objects"),
        ("[{} {}]", "',' or ']' expected"),
        ("[{}] x", "text after the array"),
        ("[1]", "expected JSON objects"),
    ]
    for broken, said in refusals:
        (tmp_path / "broken.json").write_text(broken)
        with pytest.raises(InputError, match=said):
            list(json_array_records(tmp_path / "broken.json", "--dataset broken.json"))
    text = "first\n\n\nsecond\nline\n\n\n\nthird \n \n\nfourth\n\n"
    (tmp_path / "d.txt").write_text(text)
    expected = [{"text": block.strip()} for block in text.split("\n\n") if block.strip()]
    assert list(text_documents(tmp_path / "d.txt")) == expected


def test_a_bad_jsonl_line_is_named_by_its_number(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "a"}\n\n{"text": \n')
    with pytest.raises(InputError, match=r"--dataset .*d.jsonl: not valid JSON \(line 3: "):
        build_packed_data(DataConfig(dataset=str(data), seq_len=1, workers=1), ByteTokenizer())


def test_a_refusal_in_a_worker_reaches_the_cache_and_the_waiting_ranks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A line that only a worker parses (the fourth batch's) is refused there: the error comes back through the pool
    with its line number, no entry or staging directory is left, and the marker tells the other ranks."""
    monkeypatch.setattr(records_module, "BATCH_RECORDS", 4)
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in generated("text", 14)) + "{broken\n")
    config = DataConfig(dataset=str(data), seq_len=4, workers=2)
    cache = tmp_path / "cache"
    with pytest.raises(InputError, match=r"not valid JSON \(line 15: "):
        build_entry(config, ByteTokenizer(), cache)
    (marker,) = cache.iterdir()
    assert marker.suffix == ".error" and "line 15" in json.loads(marker.read_text())["message"]


def test_a_worker_killed_mid_batch_fails_the_preparation_instead_of_waiting_forever() -> None:
    """A worker that dies (the OOM killer's SIGKILL) loses its batch: the preparation fails and names the workers,
    where a multiprocessing Pool would start a new worker and wait for the lost result without end. Run in a thread
    so that a hang fails the test instead of stalling the suite."""
    records = [[{"text": "abc"}] * 4 for _ in range(12)]
    records[2] = [{"text": KILL_TEXT}] * 4  # the third batch's worker is killed
    batches = [records_module.RecordBatch(4 * i, "--dataset d", records=r) for i, r in enumerate(records)]
    recipe = tokenise_module.Recipe(KilledAtATextTokenizer(), "text")
    failure: list[BaseException] = []

    def run() -> None:
        try:
            list(tokenise_module.tokenised(batches, recipe, workers=2))
        except BaseException as error:  # handed to the test's thread
            failure.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive(), "the preparation still waits for the killed worker's batch"
    (error,) = failure
    assert isinstance(error, RuntimeError) and "--data-workers" in str(error)


def test_the_workers_are_forked_by_a_process_of_one_thread_not_by_this_threaded_one() -> None:
    """This process has threads when it tokenises (here one of its own; the Rust tokenizer's pool, torch's, gloo's
    in a trainer), and a fork copies only the forking thread: the workers come from a fork server instead."""
    stop = threading.Event()
    waiting = threading.Thread(target=stop.wait, daemon=True)
    waiting.start()
    try:
        assert thread_count(os.getpid()) > 1
        batches = [records_module.RecordBatch(i, "--dataset d", records=[{"text": "x"}]) for i in range(6)]
        recipe = tokenise_module.Recipe(ForkerTokenizer(), "text")
        seen = {tuple(tokens.train.ids[1:3].tolist()) for tokens in tokenise_module.tokenised(batches, recipe, 2)}
    finally:
        stop.set()
    ((forker, threads),) = seen  # one fork server made both workers
    assert forker != os.getpid() and threads == 1


def test_an_entrys_files_are_on_disk_before_it_is_renamed_into_place(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """tokens.npy, trainable.npy and meta.json are synced before the rename that makes the entry visible: a node lost
    with them in its page cache leaves no complete-looking entry of missing ids on the shared file system."""
    events: list[str] = []
    fsync, rename = os.fsync, os.rename

    def recorded_fsync(fd: int) -> None:
        events.append("fsync " + Path(os.readlink(f"/proc/self/fd/{fd}")).name)
        fsync(fd)

    def recorded_rename(source: Any, target: Any) -> None:
        events.append("rename")
        rename(source, target)

    monkeypatch.setattr(os, "fsync", recorded_fsync)
    monkeypatch.setattr(os, "rename", recorded_rename)
    data = write_jsonl(tmp_path / "d.jsonl", generated("text", 20))
    build_entry(DataConfig(dataset=str(data), seq_len=4, workers=1), ByteTokenizer(), tmp_path / "cache")
    assert events[-1] == "rename"
    assert {"fsync tokens.npy", "fsync trainable.npy", "fsync meta.json"} <= set(events[:-1])


def test_npy_files_appended_in_pieces_load_as_one_array(tmp_path: Path) -> None:
    appender = NpyAppender(tmp_path / "a.npy", np.dtype(np.uint32))
    pieces = [np.arange(n, dtype=np.int64) + 150_000 for n in (0, 3, 1000, 1)]
    for piece in pieces:
        appender.append(piece)
    assert appender.close() == 1004
    loaded = np.load(tmp_path / "a.npy", mmap_mode="r")
    assert loaded.dtype == np.uint32 and loaded.tolist() == np.concatenate(pieces).tolist()


def peak_bytes_preparing(config: DataConfig, directory: Path) -> int:
    directory.mkdir()
    tracemalloc.start()
    try:
        files = EntryFiles(directory)
        prepare(config, ByteTokenizer(), files)
        files.close()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_does_not_grow_with_the_corpus(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Python and numpy allocations (tracemalloc sees both) while a corpus is cached: the same for 8 times the
    records, and far below the corpus (the old path held every record and every id as Python objects)."""
    monkeypatch.setattr(records_module, "BATCH_RECORDS", 32)
    peaks = {}
    for count in (1000, 8000):
        corpus = write_jsonl(tmp_path / f"{count}.jsonl", generated("instruction", count, seed=count))
        peaks[count] = peak_bytes_preparing(DataConfig(dataset=str(corpus), workers=1), tmp_path / f"entry-{count}")
        if count == 8000:
            assert peaks[count] < corpus.stat().st_size / 4
    assert peaks[8000] < 1.5 * peaks[1000]


def test_a_hub_data_set_is_read_from_its_arrow_table_a_slice_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """datasets.load_dataset's table (memory-mapped Arrow files in the cache) is read in slices of rows, each row a
    record, in order."""
    import datasets

    rows = generated("instruction", 10)
    table = datasets.Dataset.from_list(rows)
    monkeypatch.setattr(datasets, "load_dataset", lambda name, config, split: table)
    monkeypatch.setattr(records_module, "BATCH_RECORDS", 3)
    batches = list(record_batches(DataConfig(dataset="org/instructions")))
    assert [batch.first_index for batch in batches] == [0, 3, 6, 9]
    assert [record for batch in batches for record in batch.parsed()] == rows


# An owner that tokenises two batches a worker and then waits for its next batch, for good: the workers sit idle on
# their task pipe, as they do while a trainer reads its next records.
OWNER_WAITING_FOR_RECORDS = """
import sys, threading
import trainer.data.records as records
import trainer.data.tokenise as tokenise
from trainer.data.tokenizer_bytes import ByteTokenizer

def batches():
    for i in range(4):
        yield records.RecordBatch(i, "--dataset d", records=[{"text": "abc"}])
    threading.Event().wait()

for tokens in tokenise.tokenised(batches(), tokenise.Recipe(ByteTokenizer(), "text"), workers=2):
    print("tokenised", flush=True)
"""


def test_a_trainer_killed_while_it_tokenises_leaves_no_worker_behind() -> None:
    """SIGKILL (torchrun restarting its workers, the OOM killer) runs no cleanup in the owner. Each worker watches
    its owner and ends with it (trainer/base/pod/parent_death.py), then the fork server and the resource tracker end, as
    no process holds their pipes any more. Without the watch every one of them waits for good."""
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER_WAITING_FOR_RECORDS], cwd=PROJECT_ROOT, stdout=subprocess.PIPE, text=True
    )
    started: list[Proc] = []
    try:
        assert owner.stdout is not None and owner.stdout.readline() == "tokenised\n"
        started = process_tree(owner.pid)
        assert len(started) >= 3, started  # the owner, its fork server, and a worker at least
        owner.kill()
        owner.wait()
        deadline = time.monotonic() + 30
        while any(alive(proc) for proc in started) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [proc for proc in started if alive(proc)], "left behind by the killed owner"
    finally:
        owner.kill()
        owner.wait()
        signal_all(started, signal.SIGKILL)
