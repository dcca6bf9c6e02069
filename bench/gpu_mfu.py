"""Tokens/s per GPU and MFU of the trainer on Llama-2-7B-shaped decoder layers, on one GPU (H100/H200).

The full 7B model with AdamW state does not fit one GPU without offloading, so this trains the real trainer
loop (FSDP2 on a 1-GPU mesh, bf16 compute, fp32 master weights and optimizer) on a model with the 7B shape
(hidden 4096, MLP 11008, 32 heads, vocab 32000, seq 4096) and fewer layers. MFU counts 6N + 12LHT FLOPs per
token (trainer/metrics.py) against the chip's dense bf16 peak (trainer/hardware.py). Goal: above 50%.

    python bench/gpu_mfu.py                                  # 4 layers, batch 2, seq 4096
    python bench/gpu_mfu.py --layers 8 --compile             # more layers, torch.compile per layer
    python bench/gpu_mfu.py --dry-run                        # tiny shape on CPU: exercises this script only
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

from trainer.config import TrainConfig, parse_args
from trainer.env import read_env
from trainer.main import resolve_device
from trainer.model_source import ModelSource
from trainer.presets import PRESETS
from trainer.validate import validate


def bench_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=4, help="decoder layers of the Llama-2-7B shape")
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps (compilation, allocator warmup)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps, a multiple of --warmup")
    parser.add_argument("--compile", action="store_true", help="torch.compile each decoder layer")
    parser.add_argument("--activation-checkpointing", default="none", choices=("none", "full", "selective"))
    parser.add_argument("--peak-tflops", type=float, default=None, help="override the chip's bf16 peak")
    parser.add_argument("--dry-run", action="store_true", help="tiny shape on CPU in fp32, a few steps")
    return parser.parse_args(argv)


def bench_model(args: argparse.Namespace) -> ModelSource:
    if args.dry_run:
        return ModelSource(kind="preset", name="tiny", shape=PRESETS["tiny"])
    shape = replace(PRESETS["llama2-7b"], name=f"llama2-7b-shape-{args.layers}-layers", num_layers=args.layers)
    return ModelSource(kind="preset", name=shape.name, shape=shape)


def bench_config(args: argparse.Namespace, metrics_file: str) -> TrainConfig:
    argv = ["--tokenizer", "byte", "--seq-len", str(args.seq_len), "--batch-size", str(args.batch_size),
            "--global-batch-size", str(args.batch_size), "--steps", str(args.warmup + args.steps),
            "--log-every", str(args.warmup), "--activation-checkpointing", args.activation_checkpointing,
            "--metrics-file", metrics_file, "--lr", "1e-5"]  # fmt: skip
    if args.dry_run:
        argv += ["--device", "cpu", "--mixed-precision", "fp32", "--peak-tflops", "1"]
    else:
        argv += ["--device", "cuda", "--mixed-precision", "bf16"]
    if args.peak_tflops:
        argv += ["--peak-tflops", str(args.peak_tflops)]
    if args.compile:
        argv.append("--compile")
    return parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = bench_args(argv)
    if args.dry_run:
        args.seq_len, args.batch_size, args.warmup, args.steps = 64, 2, 2, 4
    if args.steps % args.warmup:
        raise SystemExit("--steps must be a multiple of --warmup (the trainer logs every --warmup steps)")
    source, env = bench_model(args), read_env()
    with tempfile.TemporaryDirectory() as scratch:
        metrics_file = str(Path(scratch) / "metrics.jsonl")
        config = bench_config(args, metrics_file)
        device_type = resolve_device(config.parallel.device)
        errors = validate(config, env, device_type, source)
        if errors:
            raise SystemExit("\n".join(errors))
        from trainer.train import run

        run(config, env, source, device_type)
        records = [json.loads(line) for line in Path(metrics_file).read_text().splitlines()]
    report(args, source, [r for r in records if r["step"] > args.warmup])


def report(args: argparse.Namespace, source: ModelSource, timed: list[dict]) -> None:
    per_gpu = sum(r["tokens_per_second_per_gpu"] for r in timed) / len(timed)
    mfus = [r["mfu"] for r in timed if r["mfu"] is not None]
    mfu = sum(mfus) / len(mfus) if mfus else None
    peak_gib = max(r["peak_memory_bytes"] for r in timed) / 2**30
    print(
        f"\n{source.name}: {source.shape.num_parameters / 1e9:.2f}B parameters, seq {args.seq_len}, batch "
        f"{args.batch_size}, compile {args.compile}, activation checkpointing {args.activation_checkpointing}"
    )
    print("| tokens/s/GPU | MFU | peak memory | timed steps |")
    print("|---|---|---|---|")
    mfu_text = "n/a (unknown chip: pass --peak-tflops)" if mfu is None else f"{100 * mfu:.1f}%"
    print(f"| {per_gpu:,.0f} | {mfu_text} | {peak_gib:.1f} GiB | {args.steps} |")
    if args.dry_run:
        print("(dry run on CPU: the figures say nothing about a GPU)")


if __name__ == "__main__":
    main()
