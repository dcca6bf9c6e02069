"""Trainer overhead: the trainer's tokens/s next to a bare `fully_shard` training loop, same model and batch.

Both loops run in the same processes, alternating, so they see the same machine. The bare loop is the least
one can write: FSDP per decoder layer and at the root, forward, cross-entropy, backward, AdamW step. The trainer
adds what it is for: its data pipeline, loss normalisation over the global batch, gradient-norm clipping, LR
schedule and metrics (all-reduced at log steps). Setup (model init, data packing) is excluded from both.

    OMP_NUM_THREADS=1 torchrun --standalone --nproc-per-node 2 bench/trainer_overhead.py        # 2 ranks, gloo
    python bench/trainer_overhead.py --model tiny --steps 20 --warmup 10                        # quick check
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.nn.functional import cross_entropy

from trainer.config import TrainConfig, parse_args
from trainer.distributed import init_distributed, leave_distributed
from trainer.env import read_env
from trainer.model import hf_config
from trainer.model_source import resolve_model
from trainer.train import load_data, train


def bench_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="small", help="preset to train (default: small, ~100M parameters)")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=2, help="sequences per rank per step")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps before the timed ones")
    parser.add_argument("--steps", type=int, default=15, help="timed steps (a multiple of --warmup)")
    parser.add_argument("--rounds", type=int, default=2, help="times each loop runs, alternating")
    return parser.parse_args(argv)


def trainer_config(args: argparse.Namespace, world_size: int, metrics_file: str) -> TrainConfig:
    return parse_args(
        ["--model", args.model, "--tokenizer", "byte", "--device", "cpu", "--mixed-precision", "fp32",
         "--seq-len", str(args.seq_len), "--batch-size", str(args.batch_size),
         "--global-batch-size", str(args.batch_size * world_size), "--steps", str(args.warmup + args.steps),
         "--log-every", str(args.warmup), "--lr", "1e-4", "--metrics-file", metrics_file]
    )  # fmt: skip


def trainer_tokens_per_second(args: argparse.Namespace, world_size: int) -> float:
    """The trainer's own throughput figure over the timed steps (its metrics after the warmup interval)."""
    with tempfile.TemporaryDirectory() as scratch:
        metrics_file = str(Path(scratch) / "metrics.jsonl")
        config = trainer_config(args, world_size, metrics_file)
        source = resolve_model(args.model)
        _, data = load_data(config, source)
        train(config, read_env(), source, torch.device("cpu"), data)
        if not Path(metrics_file).exists():  # ranks other than 0 write no metrics
            return float("nan")
        records = [json.loads(line) for line in Path(metrics_file).read_text().splitlines()]
    timed = [r for r in records if r["step"] > args.warmup]
    step_time = sum(r["step_time_s"] for r in timed) / len(timed)
    return args.batch_size * world_size * args.seq_len / step_time


def bare_tokens_per_second(args: argparse.Namespace, world_size: int) -> float:
    """The plainest FSDP2 loop over the same model, batch and sequence length."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(hf_config(resolve_model(args.model)), attn_implementation="sdpa")
    mesh = init_device_mesh("cpu", (world_size,))
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh, reshard_after_forward=False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, 256, (args.batch_size, args.seq_len + 1))
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            dist.barrier()
            started = time.perf_counter()
        logits = model(input_ids=inputs).logits
        loss = cross_entropy(logits.float().flatten(0, 1), targets.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    loss.item()
    dist.barrier()
    return args.steps * args.batch_size * world_size * args.seq_len / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> None:
    args = bench_args(argv)
    if args.steps % args.warmup:
        raise SystemExit("--steps must be a multiple of --warmup (the trainer logs every --warmup steps)")
    env = read_env()
    init_distributed(env, torch.device("cpu"))
    results: dict[str, list[float]] = {"bare fully_shard loop": [], "trainer (python -m trainer)": []}
    try:
        for _ in range(args.rounds):
            results["bare fully_shard loop"].append(bare_tokens_per_second(args, env.world_size))
            results["trainer (python -m trainer)"].append(trainer_tokens_per_second(args, env.world_size))
    finally:
        leave_distributed()
    if env.is_leader:
        print_table(args, env.world_size, results)


def print_table(args: argparse.Namespace, world_size: int, results: dict[str, list[float]]) -> None:
    print(f"\nmodel {args.model}, {world_size} rank(s) on CPU (gloo), fp32, batch {args.batch_size}/rank, "
          f"seq {args.seq_len}, {args.steps} timed steps after {args.warmup}, OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}")  # fmt: skip
    header = "| loop | " + " | ".join(f"round {i + 1} tok/s" for i in range(args.rounds)) + " | best tok/s |"
    print(header)
    print("|" + "---|" * (args.rounds + 2))
    for name, values in results.items():
        print(f"| {name} | " + " | ".join(f"{v:,.0f}" for v in values) + f" | {max(values):,.0f} |")
    bare, ours = max(results["bare fully_shard loop"]), max(results["trainer (python -m trainer)"])
    print(f"\ntrainer / bare (best rounds): {ours / bare:.3f} ({100 * (ours / bare - 1):+.1f}%)")


if __name__ == "__main__":
    main()
