"""Trainer overhead: the trainer's tokens/s next to a bare `fully_shard` training loop, same model and batch.

Both loops run in the same processes, alternating, so they see the same machine. The bare loop is the least
one can write: FSDP per decoder layer and at the root, forward, cross-entropy, backward, gradient clipping, AdamW
step (same hyperparameters). The trainer adds what it is for: its data pipeline, loss normalisation over the global
batch, LR schedule and metrics (all-reduced at log steps). Setup (model init, data packing) is excluded from both.
Two figures per loop: tokens per second of wall time, and tokens per second of rank 0's process CPU time (the
work done, which on a shared machine is far steadier than wall time).

    OMP_NUM_THREADS=1 torchrun --standalone --nproc-per-node 2 bench/trainer_overhead.py        # 2 ranks, gloo
    python bench/trainer_overhead.py --model tiny --steps 20 --warmup 10                        # quick check
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.nn.functional import cross_entropy

from trainer.base.flags.config import TrainConfig, parse_args
from trainer.base.model.source import resolve_model
from trainer.base.pod.env import read_env
from trainer.comms.distributed import init_distributed, leave_distributed
from trainer.model.build import hf_config
from trainer.optim import ADAM_BETAS
from trainer.train import load_data, train

GRAD_CLIP = 1.0  # both loops clip, as any training loop does


def bench_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--model", default="small", help="preset to train (default: small, ~100M parameters)")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=2, help="sequences per rank per step")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps before the timed ones")
    parser.add_argument("--steps", type=int, default=10, help="timed steps (a multiple of --warmup)")
    parser.add_argument("--rounds", type=int, default=3, help="times each loop runs, alternating")
    return parser.parse_args(argv)


def trainer_config(args: argparse.Namespace, world_size: int, metrics_file: str) -> TrainConfig:
    return parse_args(
        ["--model", args.model, "--tokenizer", "byte", "--device", "cpu", "--mixed-precision", "fp32",
         "--seq-len", str(args.seq_len), "--batch-size", str(args.batch_size),
         "--global-batch-size", str(args.batch_size * world_size), "--steps", str(args.warmup + args.steps),
         "--log-every", str(args.warmup), "--lr", "1e-4", "--grad-clip", str(GRAD_CLIP), "--weight-decay", "0",
         "--metrics-file", metrics_file]
    )  # fmt: skip


@dataclass
class Throughput:
    wall: float
    """Tokens per second of wall time: what a job sees, but on a shared machine also everyone else's load."""
    cpu: float
    """Tokens per second of rank 0's process CPU time: the work done, insensitive to waiting for a busy CPU."""


def trainer_throughput(args: argparse.Namespace, world_size: int) -> Throughput:
    """The trainer's own figures over the timed steps (its metrics after the warmup interval)."""
    with tempfile.TemporaryDirectory() as scratch:
        metrics_file = str(Path(scratch) / "metrics.jsonl")
        config = trainer_config(args, world_size, metrics_file)
        source = resolve_model(args.model)
        _, splits = load_data(config, source)
        train(config, read_env(), source, torch.device("cpu"), splits.train)
        if not Path(metrics_file).exists():  # ranks other than 0 write no metrics
            return Throughput(float("nan"), float("nan"))
        records = [json.loads(line) for line in Path(metrics_file).read_text().splitlines()]
    timed = [r for r in records if r["step"] > args.warmup]
    tokens_per_step = args.batch_size * world_size * args.seq_len
    wall = sum(r["step_time_s"] for r in timed) / len(timed)
    cpu = sum(r["cpu_time_per_step_s"] for r in timed) / len(timed)
    return Throughput(tokens_per_step / wall, tokens_per_step / cpu)


def bare_throughput(args: argparse.Namespace, world_size: int) -> Throughput:
    """The plainest FSDP2 loop over the same model, batch and sequence length."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(hf_config(resolve_model(args.model)), attn_implementation="sdpa")
    mesh = init_device_mesh("cpu", (world_size,))
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh, reshard_after_forward=False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=ADAM_BETAS, weight_decay=0.0)
    tokens = torch.randint(0, 256, (args.batch_size, args.seq_len + 1))
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    def train_step() -> torch.Tensor:
        logits = model(input_ids=inputs).logits
        loss = cross_entropy(logits.float().flatten(0, 1), targets.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    for _ in range(args.warmup):
        train_step()
    dist.barrier()
    started, started_cpu = time.perf_counter(), time.process_time()
    for _ in range(args.steps - 1):
        train_step()
    train_step().item()  # the last step's loss read back: the timed steps have all run
    wall, cpu = time.perf_counter() - started, time.process_time() - started_cpu
    dist.barrier()
    tokens_trained = args.steps * args.batch_size * world_size * args.seq_len
    return Throughput(tokens_trained / wall, tokens_trained / cpu)


BARE, TRAINER = "bare fully_shard loop", "trainer (python -m trainer)"


def main(argv: list[str] | None = None) -> None:
    args = bench_args(argv)
    if args.steps % args.warmup:
        raise SystemExit("--steps must be a multiple of --warmup (the trainer logs every --warmup steps)")
    env = read_env()
    init_distributed(env, torch.device("cpu"))
    results: dict[str, list[Throughput]] = {BARE: [], TRAINER: []}
    try:
        for round_index in range(args.rounds):
            loops = [(BARE, bare_throughput), (TRAINER, trainer_throughput)]
            for name, measure in loops if round_index % 2 == 0 else loops[::-1]:  # alternate who goes first
                results[name].append(measure(args, env.world_size))
    finally:
        leave_distributed()
    if env.is_leader:
        print(
            f"\nmodel {args.model}, {env.world_size} rank(s) on CPU (gloo), fp32, batch {args.batch_size}/rank, "
            f"seq {args.seq_len}, {args.steps} timed steps after {args.warmup}, "
            f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}"
        )
        print_table("tokens/s (wall time)", {name: [t.wall for t in runs] for name, runs in results.items()})
        print_table("tokens per CPU-second of rank 0", {name: [t.cpu for t in runs] for name, runs in results.items()})


def print_table(title: str, results: dict[str, list[float]]) -> None:
    rounds = len(results[BARE])
    print(f"\n{title}\n")
    print("| loop | " + " | ".join(f"round {i + 1}" for i in range(rounds)) + " | median |")
    print("|" + "---|" * (rounds + 2))
    for name, values in results.items():
        print(f"| {name} | " + " | ".join(f"{v:,.1f}" for v in values) + f" | {statistics.median(values):,.1f} |")
    # Each round runs both loops back to back, so their ratio is less exposed to the machine's other load than
    # either figure alone; the median over rounds is the headline.
    ratios = [t / b for b, t in zip(results[BARE], results[TRAINER], strict=True)]
    median = statistics.median(ratios)
    print("| trainer / bare | " + " | ".join(f"{r:.3f}" for r in ratios) + f" | {median:.3f} |")
    print(f"\ntrainer / bare ({title}), median over rounds: {median:.3f} ({100 * (median - 1):+.1f}%)")


if __name__ == "__main__":
    main()
