"""Our trainer against torchtitan's on the same work, in alternating rounds: tokens/s and peak memory per rank.

    .venv/bin/python bench/vs_torchtitan.py                 # 1 discarded + 5 rounds; sets up torchtitan's environment
    .venv/bin/python bench/vs_torchtitan.py --rounds 3 --titan-loss chunked --titan-optimizer fused

The work (both sides): the `small` preset's shape (105.8M parameters), fp32, 2 ranks over gloo on CPU, FULL_SHARD,
seq 128, batch 2 per rank, AdamW (lr 1e-4, betas 0.9/0.95, eps 1e-8, no weight decay), gradients clipped at norm
1.0; `--warmup` untimed steps, then `--steps` timed ones in intervals of `--warmup` steps (our trainer logs once per
interval: its metrics all-reduce is part of its work), each run's figure the median over its intervals, so a burst
of other work on the machine spoils one interval rather than the run. Each side runs as its own torchrun job
(`python -m trainer`, and bench/torchtitan_run.py in torchtitan's environment from bench/torchtitan_setup.py), so
each process's peak resident set (VmHWM, the busiest rank's) is that trainer's alone. A round runs both, the order
alternating between rounds, and their ratio is the round's figure: both saw the same machine within a few minutes,
which on a shared machine matters more than any one figure. The headline is the median over rounds. The first
`--discard-rounds` rounds run the same work unrecorded: the first start of each environment reads its files from
disk and was the slowest round of earlier measurements.
Two throughput figures: tokens per second of wall time (what a job sees) and tokens per second of rank 0's
process CPU time (the work done; far steadier when other work shares the machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

from bench.torchtitan_setup import VENV, set_up  # noqa: E402
from trainer.base.model.presets import PRESETS  # noqa: E402
from trainer.base.units import GIB  # noqa: E402

RANKS = 2


@dataclass(frozen=True)
class Run:
    tokens_per_second: float
    tokens_per_cpu_second: float
    """Tokens per second of rank 0's process CPU time."""
    peak_memory_bytes: int
    """The busiest rank's peak resident set (VmHWM)."""


def bench_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--model", default="small", choices=PRESETS, help="the preset both train (default: small)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps")
    parser.add_argument("--steps", type=int, default=20, help="timed steps, a multiple of --warmup")
    parser.add_argument("--discard-rounds", type=int, default=1, help="rounds run first and not recorded")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=2, help="sequences per rank per step")
    parser.add_argument("--titan-loss", default="plain", choices=("plain", "chunked"),
                        help="torchtitan's loss: plain cross-entropy (its fastest here) or the chunked one of its "
                        "Llama 3 configs (docs/performance.md)")  # fmt: skip
    parser.add_argument(
        "--titan-optimizer",
        default="foreach",
        choices=("foreach", "fused", "for-loop"),
        help="torchtitan's AdamW implementation (foreach: its fastest here; fused: its default)",
    )
    parser.add_argument("--venv", type=Path, default=VENV, help="torchtitan's environment")
    return parser.parse_args(argv)


def torchrun(python: Path | str, *args: str) -> list[str]:
    return [str(python), "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={RANKS}", *args]


def ours_command(args: argparse.Namespace, metrics: Path) -> list[str]:
    return torchrun(sys.executable, "-m", "trainer", "--model", args.model, "--tokenizer", "byte", "--device", "cpu",
        "--mixed-precision", "fp32", "--sharding-strategy", "FULL_SHARD", "--seq-len", str(args.seq_len),
        "--batch-size", str(args.batch_size), "--global-batch-size", str(args.batch_size * RANKS),
        "--steps", str(args.warmup + args.steps), "--log-every", str(args.warmup), "--lr", "1e-4",
        "--weight-decay", "0", "--grad-clip", "1.0", "--metrics-file", str(metrics))  # fmt: skip


def run_ours(args: argparse.Namespace, scratch: Path) -> Run:
    metrics = scratch / "ours.jsonl"
    metrics.unlink(missing_ok=True)
    launch(ours_command(args, metrics), scratch / "ours.log")
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    timed = [r for r in records if r["step"] > args.warmup]  # the intervals after the warmup interval
    tokens_per_step = args.batch_size * RANKS * args.seq_len
    wall = statistics.median(r["step_time_s"] for r in timed)
    cpu = statistics.median(r["cpu_time_per_step_s"] for r in timed)
    return Run(tokens_per_step / wall, tokens_per_step / cpu, max(r["peak_memory_bytes"] for r in records))


def run_torchtitan(args: argparse.Namespace, scratch: Path, python: Path) -> Run:
    result = scratch / "torchtitan.json"
    result.unlink(missing_ok=True)
    shape = PRESETS[args.model]
    command = torchrun(python, str(ROOT / "bench" / "torchtitan_run.py"), "--vocab", str(shape.vocab_size),
        "--dim", str(shape.hidden_size), "--ffn-dim", str(shape.intermediate_size), "--layers", str(shape.num_layers),
        "--heads", str(shape.num_heads), "--kv-heads", str(shape.num_kv_heads), "--warmup", str(args.warmup),
        "--steps", str(args.steps), "--interval", str(args.warmup), "--seq-len", str(args.seq_len),
        "--batch-size", str(args.batch_size),
        "--loss", args.titan_loss, "--optimizer", args.titan_optimizer, "--result", str(result))  # fmt: skip
    launch(command, scratch / "torchtitan.log")
    figures = json.loads(result.read_text())
    tokens_per_step = args.batch_size * RANKS * args.seq_len
    wall = statistics.median(figures["interval_step_seconds"])
    cpu = statistics.median(figures["interval_step_cpu_seconds"])
    return Run(tokens_per_step / wall, tokens_per_step / cpu, figures["peak_memory_bytes"])


# Runs started again after a failure before the bench gives up: a worker of either trainer is at times killed by
# SIGABRT ("terminate called without an active exception") on a loaded 2-core machine; a rerun measures the same work.
LAUNCH_ATTEMPTS = 3


def launch(command: list[str], log: Path) -> None:
    what = ""  # each attempt says how it ended; there is at least one (LAUNCH_ATTEMPTS)
    for attempt in range(1, LAUNCH_ATTEMPTS + 1):
        with log.open("w") as out:
            done = subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        if not done.returncode:
            return
        what = f"{' '.join(command[:6])} ... exited with {done.returncode}"
        if attempt < LAUNCH_ATTEMPTS:
            print(f"rerun ({attempt} of {LAUNCH_ATTEMPTS - 1}): {what}", flush=True)
    tail = log.read_text()[-4000:]
    raise SystemExit(f"{what} {LAUNCH_ATTEMPTS} times; the end of its output:\n{tail}")


def main(argv: list[str] | None = None) -> None:
    args = bench_args(argv)
    if args.steps % args.warmup:
        raise SystemExit("--steps must be a multiple of --warmup (the trainer logs every --warmup steps)")
    python = set_up(args.venv)
    ours: list[Run] = []
    theirs: list[Run] = []
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        sides: list[Callable[[], None]] = [
            lambda: ours.append(run_ours(args, scratch)),
            lambda: theirs.append(run_torchtitan(args, scratch, python)),
        ]
        for round_index in range(-args.discard_rounds, args.rounds):
            for side in sides if round_index % 2 == 0 else sides[::-1]:  # alternate who goes first
                side()
            if round_index < 0:
                print(f"discarded: ours {ours.pop().tokens_per_second:.1f} tokens/s, torchtitan "
                      f"{theirs.pop().tokens_per_second:.1f}", flush=True)  # fmt: skip
                continue
            print(f"round {round_index + 1}: ours {ours[-1].tokens_per_second:.1f} tokens/s, "
                  f"torchtitan {theirs[-1].tokens_per_second:.1f}; load average {load_average()}",
                  flush=True)  # fmt: skip
    print(report(args, ours, theirs))


def load_average() -> str:
    """The machine's 1-, 5- and 15-minute load averages: how much other work shared the round."""
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def row(name: str, values: list[float], digits: int, bold_median: bool = False) -> str:
    median = f"{statistics.median(values):.{digits}f}"
    return (
        f"| {name} | "
        + " | ".join(f"{v:.{digits}f}" for v in values)
        + (f" | **{median}** |" if bold_median else f" | {median} |")
    )


def report(args: argparse.Namespace, ours: list[Run], theirs: list[Run]) -> str:
    """The table: per round and side, tokens/s (wall and CPU time), their ratios, peak memory; medians."""
    rounds = len(ours)
    wall_ratios = [o.tokens_per_second / t.tokens_per_second for o, t in zip(ours, theirs, strict=True)]
    cpu_ratios = [o.tokens_per_cpu_second / t.tokens_per_cpu_second for o, t in zip(ours, theirs, strict=True)]
    lines = [
        f"\n{args.model} preset ({PRESETS[args.model].num_parameters / 1e6:.1f}M parameters), {RANKS} ranks on CPU "
        f"over gloo, fp32, FULL_SHARD, seq {args.seq_len}, "
        f"batch {args.batch_size}/rank, AdamW, clip 1.0; {args.steps} timed steps after {args.warmup}, median of "
        f"{args.steps // args.warmup} intervals of {args.warmup}; {args.discard_rounds} round(s) discarded; torchtitan "
        f"with {args.titan_loss} loss, {args.titan_optimizer} AdamW",
        "",
        "| | " + " | ".join(f"round {i + 1}" for i in range(rounds)) + " | median |",
        "|---|" + "---:|" * (rounds + 1),
        row("ours, tokens/s", [r.tokens_per_second for r in ours], 1),
        row("torchtitan, tokens/s", [r.tokens_per_second for r in theirs], 1),
        row("ours / torchtitan (wall)", wall_ratios, 3, bold_median=True),
        row("ours, tokens per CPU-second", [r.tokens_per_cpu_second for r in ours], 1),
        row("torchtitan, tokens per CPU-second", [r.tokens_per_cpu_second for r in theirs], 1),
        row("ours / torchtitan (CPU time)", cpu_ratios, 3, bold_median=True),
        row("ours, peak GiB per rank", [r.peak_memory_bytes / GIB for r in ours], 3),
        row("torchtitan, peak GiB per rank", [r.peak_memory_bytes / GIB for r in theirs], 3),
        "",
        f"ours / torchtitan, median of {rounds} rounds: {statistics.median(wall_ratios):.3f} in wall time, "
        f"{statistics.median(cpu_ratios):.3f} in CPU time",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
