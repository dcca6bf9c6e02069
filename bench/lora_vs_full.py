"""LoRA against full fine-tuning on CPU: the trainer's tokens/s and peak memory, same model, same work.

Both are `python -m trainer` with the same flags (model, data, batch, sequence length, steps, precision, seed); LoRA
adds only --lora-rank. Each run is a fresh process (torchrun with --nproc-per-node > 1), so its peak resident set is
its own (the trainer's peak_memory_bytes: VmHWM on CPU, the busiest rank's); the two alternate, round after round,
who goes first alternating too, so both see the same machine. Figures per run, over the steps after --warmup: tokens
per second of wall time, tokens per second of rank 0's process CPU time (far steadier on a shared machine), and the
peak memory. Setup (model init, data packing) is excluded from the throughput, not from the peak.

    OMP_NUM_THREADS=1 python bench/lora_vs_full.py                  # small (106M), 2 ranks, 3 rounds
    python bench/lora_vs_full.py --model tiny --steps 4 --warmup 2 --rounds 1 --nproc 1   # quick check
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GIB = 2**30
FULL, LORA = "full fine-tuning", "LoRA"


def bench_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--model", default="small", help="preset to train (default: small, 106M parameters)")
    parser.add_argument("--nproc", type=int, default=2, help="ranks (torchrun) per run (default: 2)")
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=2, help="sequences per rank per step")
    parser.add_argument("--mixed-precision", default="bf16", choices=("bf16", "fp32"))
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps before the timed ones")
    parser.add_argument("--steps", type=int, default=9, help="timed steps (a multiple of --warmup)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each, alternating")
    return parser.parse_args(argv)


@dataclass(frozen=True)
class Run:
    wall: float
    """Tokens per second of wall time."""
    cpu: float
    """Tokens per second of rank 0's process CPU time."""
    peak_bytes: int
    """The busiest rank's peak resident set (VmHWM), from the trainer's metrics."""


def trainer_argv(args: argparse.Namespace, lora: bool, metrics_file: str) -> list[str]:
    argv = ["--model", args.model, "--tokenizer", "byte", "--device", "cpu", "--mixed-precision", args.mixed_precision,
            "--seq-len", str(args.seq_len), "--batch-size", str(args.batch_size),
            "--global-batch-size", str(args.batch_size * args.nproc), "--steps", str(args.warmup + args.steps),
            "--log-every", str(args.warmup), "--lr", "1e-4", "--seed", "0", "--metrics-file", metrics_file]  # fmt: skip
    return [*argv, "--lora-rank", str(args.lora_rank)] if lora else argv


def run_once(args: argparse.Namespace, lora: bool) -> Run:
    with tempfile.TemporaryDirectory() as scratch:
        metrics_file = str(Path(scratch) / "metrics.jsonl")
        launcher = [sys.executable, "-m", "trainer"]
        if args.nproc > 1:
            launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                        str(args.nproc), "-m", "trainer"]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
        env.setdefault("OMP_NUM_THREADS", "1")
        done = subprocess.run(
            [*launcher, *trainer_argv(args, lora, metrics_file)], cwd=ROOT, env=env, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise SystemExit(
                f"the {'LoRA' if lora else 'full'} run failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
            )
        records = [json.loads(line) for line in Path(metrics_file).read_text().splitlines() if line.strip()]
    timed = [r for r in records if r["step"] > args.warmup]
    tokens_per_step = args.batch_size * args.nproc * args.seq_len
    wall = statistics.mean(r["step_time_s"] for r in timed)
    cpu = statistics.mean(r["cpu_time_per_step_s"] for r in timed)
    return Run(tokens_per_step / wall, tokens_per_step / cpu, max(r["peak_memory_bytes"] for r in records))


def main(argv: list[str] | None = None) -> None:
    args = bench_args(argv)
    if args.steps % args.warmup:
        raise SystemExit("--steps must be a multiple of --warmup (the trainer logs every --warmup steps)")
    results: dict[str, list[Run]] = {FULL: [], LORA: []}
    for round_index in range(args.rounds):
        order = [(FULL, False), (LORA, True)]
        for name, lora in order if round_index % 2 == 0 else order[::-1]:  # alternate who goes first
            results[name].append(run_once(args, lora))
            print(f"round {round_index + 1}: {name}: {results[name][-1]}", file=sys.stderr)
    print(
        f"\nmodel {args.model}, {args.nproc} rank(s) on CPU (gloo), {args.mixed_precision}, "
        f"batch {args.batch_size}/rank, seq {args.seq_len}, {args.steps} timed steps after {args.warmup}, "
        f"LoRA rank {args.lora_rank} on the attention and MLP projections, "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '1')}"
    )
    print_table("tokens/s (wall time)", {name: [r.wall for r in runs] for name, runs in results.items()}, "{:,.0f}")
    print_table("tokens per CPU-second of rank 0", {n: [r.cpu for r in runs] for n, runs in results.items()}, "{:,.0f}")
    print_table(
        "peak memory of the busiest rank (GiB, resident set)",
        {name: [r.peak_bytes / GIB for r in runs] for name, runs in results.items()},
        "{:.2f}",
    )


def print_table(title: str, results: dict[str, list[float]], number: str) -> None:
    rounds = len(results[FULL])
    print(f"\n{title}\n")
    print("| run | " + " | ".join(f"round {i + 1}" for i in range(rounds)) + " | median |")
    print("|" + "---|" * (rounds + 2))
    for name, values in results.items():
        print(
            f"| {name} | "
            + " | ".join(number.format(v) for v in values)
            + f" | {number.format(statistics.median(values))} |"
        )
    # Each round runs both back to back: their ratio is less exposed to the machine's other load than either figure.
    ratios = [lora / full for full, lora in zip(results[FULL], results[LORA], strict=True)]
    print("| LoRA / full | " + " | ".join(f"{r:.2f}" for r in ratios) + f" | {statistics.median(ratios):.2f} |")


if __name__ == "__main__":
    main()
