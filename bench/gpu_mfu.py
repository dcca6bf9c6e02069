"""Tokens/s per GPU and MFU of the trainer on Llama-2-7B-shaped decoder layers, on one GPU (H100/H200).

The full 7B model with AdamW state does not fit one GPU without offloading, so this trains the real trainer
loop (FSDP2 on a 1-GPU mesh, bf16 compute, fp32 master weights and optimizer) on a model with the 7B shape
(hidden 4096, MLP 11008, 32 heads, vocab 32000, seq 4096) and fewer layers. Then torchtitan's own trainer, in its
environment (bench/torchtitan_setup.py), on the same shape, batch and dtypes, compiled (torch.compile of its model
and loss, as its configs run it) and with its defaults otherwise (fused AdamW, chunked loss): one run gives both
rows. MFU counts 6N + 12LHT FLOPs per token (trainer/metrics.py) for both, against the chip's dense bf16 peak
(trainer/hardware.py). Goal: ours above 45% and ahead of torchtitan's compiled figure.

    python bench/gpu_mfu.py                                  # 4 layers, batch 2, seq 4096
    python bench/gpu_mfu.py --layers 8 --compile             # more layers, ours compiled per layer too
    python bench/gpu_mfu.py --matrix                         # the prepared GPU check: see below
    python bench/gpu_mfu.py --dry-run                        # tiny shape on CPU in fp32: exercises this script only

--matrix is the one script to run when a GPU is lent: ours eager and compiled, each with activation checkpointing
none, selective and selective-mm (each run a process of its own, so compile caches and allocator state start
fresh), then torchtitan's trainer eager and compiled, all in one table. --all-reduce-dtype bf16 (with
--sharding-strategy HYBRID_SHARD) selects the bf16 all-reduce across replicas; on one GPU that all-reduce runs over
a single replica, so it only shows that the path runs: its gain is between nodes (under torchrun on several).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

from bench.torchtitan_setup import VENV, set_up
from trainer.config import ACTIVATION_CHECKPOINTING, ALL_REDUCE_DTYPES, SHARDING_STRATEGIES, TrainConfig, parse_args
from trainer.env import read_env
from trainer.hardware import PEAK_BF16_FLOPS, chip_for_device_name
from trainer.main import resolve_device
from trainer.metrics import training_flops_per_token
from trainer.model.presets import PRESETS, ModelShape
from trainer.model.source import ModelSource
from trainer.validate import validate

ROOT = Path(__file__).resolve().parent.parent
MATRIX_CHECKPOINTING = ("none", "selective", "selective-mm")


def bench_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=4, help="decoder layers of the Llama-2-7B shape")
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps (compilation, allocator warmup)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps, a multiple of --warmup")
    parser.add_argument("--compile", action="store_true", help="torch.compile each decoder layer")
    parser.add_argument("--activation-checkpointing", default="none", choices=ACTIVATION_CHECKPOINTING)
    parser.add_argument("--sharding-strategy", default="FULL_SHARD", choices=SHARDING_STRATEGIES)
    parser.add_argument("--replicate-groups", type=int, default=None, help="HYBRID_SHARD's replica groups")
    parser.add_argument("--all-reduce-dtype", default="fp32", choices=ALL_REDUCE_DTYPES, help="HYBRID_SHARD only")
    parser.add_argument(
        "--matrix", action="store_true",
        help=f"ours with and without --compile for each of {', '.join(MATRIX_CHECKPOINTING)}, then torchtitan's "
        "with and without compile",
    )  # fmt: skip
    parser.add_argument("--row-file", type=Path, default=None, help=argparse.SUPPRESS)  # --matrix's runs report here
    parser.add_argument("--peak-tflops", type=float, default=None, help="override the chip's bf16 peak")
    parser.add_argument("--dry-run", action="store_true", help="tiny shape on CPU in fp32, a few steps")
    parser.add_argument("--no-torchtitan", action="store_true", help="ours only")
    parser.add_argument("--venv", type=Path, default=VENV, help="torchtitan's environment")
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
            "--metrics-file", metrics_file, "--lr", "1e-5", "--sharding-strategy", args.sharding_strategy,
            "--all-reduce-dtype", args.all_reduce_dtype]  # fmt: skip
    if args.replicate_groups:
        argv += ["--replicate-groups", str(args.replicate_groups)]
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
    if args.matrix:
        with tempfile.TemporaryDirectory() as scratch:
            rows = matrix_rows(args, source.shape, Path(scratch))
        report(args, source, rows)
        return
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
        rows = [ours_row(args, [r for r in records if r["step"] > args.warmup])]
        if args.row_file:
            args.row_file.write_text(json.dumps(rows[0]))
            return
        if not args.no_torchtitan:
            rows.append(torchtitan_row(args, source.shape, Path(scratch), compiled=not args.dry_run))
    report(args, source, rows)


def passed_on(args: argparse.Namespace) -> list[str]:
    """The flags a --matrix run passes on to each of its runs of ours."""
    argv = ["--layers", str(args.layers), "--seq-len", str(args.seq_len), "--batch-size", str(args.batch_size),
            "--warmup", str(args.warmup), "--steps", str(args.steps), "--sharding-strategy", args.sharding_strategy,
            "--all-reduce-dtype", args.all_reduce_dtype]  # fmt: skip
    if args.replicate_groups:
        argv += ["--replicate-groups", str(args.replicate_groups)]
    if args.peak_tflops:
        argv += ["--peak-tflops", str(args.peak_tflops)]
    return argv + (["--dry-run"] if args.dry_run else [])


def matrix_rows(args: argparse.Namespace, shape: ModelShape, scratch: Path) -> list[dict]:
    """Ours for each checkpointing mode, eager then compiled, each in a fresh process; then torchtitan's, likewise.
    A run that fails (out of memory, a compile error) is a row saying so, and the rest still run."""
    rows = []
    for compiled in (False, True):
        for mode in MATRIX_CHECKPOINTING:
            row_file = scratch / f"ours-{mode}-{compiled}.json"
            command = [sys.executable, str(Path(__file__).resolve()), *passed_on(args), "--no-torchtitan",
                       "--activation-checkpointing", mode, "--row-file", str(row_file)]  # fmt: skip
            done = subprocess.run([*command, *(["--compile"] if compiled else [])], cwd=ROOT, check=False)
            if done.returncode == 0:
                rows.append(json.loads(row_file.read_text()))
            else:
                rows.append(failed_row("ours (python -m trainer)", mode, compiled, done.returncode))
    if not args.no_torchtitan:
        for compiled in (False, True):
            try:
                rows.append(torchtitan_row(args, shape, scratch, compiled=compiled))
            except subprocess.CalledProcessError as error:
                rows.append(failed_row("torchtitan 0.3.0", "none", compiled, error.returncode))
    return rows


def failed_row(trainer: str, mode: str, compiled: bool, returncode: int) -> dict:
    return {"trainer": f"{trainer}: failed (exit {returncode})", "activation_checkpointing": mode, "compile": compiled,
            "tokens_per_second_per_gpu": None, "mfu": None, "peak_memory_bytes": None}  # fmt: skip


def ours_row(args: argparse.Namespace, timed: list[dict]) -> dict:
    mfus = [r["mfu"] for r in timed if r["mfu"] is not None]
    return {
        "trainer": "ours (python -m trainer)"
        + (f", all-reduce {args.all_reduce_dtype}" if args.all_reduce_dtype != "fp32" else ""),
        "activation_checkpointing": args.activation_checkpointing,
        "compile": args.compile,
        "tokens_per_second_per_gpu": sum(r["tokens_per_second_per_gpu"] for r in timed) / len(timed),
        "mfu": sum(mfus) / len(mfus) if mfus else None,
        "peak_memory_bytes": max(r["peak_memory_bytes"] for r in timed),
    }


def peak_flops(args: argparse.Namespace) -> float | None:
    """The per-GPU peak the MFU divides by: --peak-tflops, 1 TFLOP/s on a dry run (as ours), else the chip's."""
    if args.peak_tflops or args.dry_run:
        return (args.peak_tflops or 1) * 1e12
    import torch

    chip = chip_for_device_name(torch.cuda.get_device_name())
    return PEAK_BF16_FLOPS.get(chip) if chip else None


def torchtitan_row(args: argparse.Namespace, shape: ModelShape, scratch: Path, compiled: bool) -> dict:
    """torchtitan's trainer on the same shape, batch and dtypes, one GPU (bench/torchtitan_run.py), compiled as its
    configs run it (torch.compile of its model and loss) or eager; no activation checkpointing."""
    python = set_up(args.venv)
    result = scratch / "torchtitan.json"
    command = [str(python), "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1",
        str(ROOT / "bench" / "torchtitan_run.py"), "--vocab", str(shape.vocab_size), "--dim", str(shape.hidden_size),
        "--ffn-dim", str(shape.intermediate_size), "--layers", str(shape.num_layers), "--heads", str(shape.num_heads),
        "--kv-heads", str(shape.num_kv_heads), "--seq-len", str(args.seq_len), "--batch-size", str(args.batch_size),
        "--warmup", str(args.warmup), "--steps", str(args.steps), "--lr", "1e-5", "--loss", "chunked",
        "--optimizer", "fused", "--dtype", "float32" if args.dry_run else "bfloat16",
        "--result", str(result)]  # fmt: skip
    if compiled:
        command.append("--compile")  # torchtitan's figure to beat is its compiled one
    subprocess.run(command, cwd=ROOT, check=True)
    figures = json.loads(result.read_text())
    per_gpu = figures["tokens_per_second"]  # one GPU
    peak = peak_flops(args)
    return {
        "trainer": "torchtitan 0.3.0",
        "activation_checkpointing": "none",
        "compile": compiled,
        "tokens_per_second_per_gpu": per_gpu,
        "mfu": per_gpu * training_flops_per_token(shape, args.seq_len) / peak if peak else None,
        "peak_memory_bytes": figures["peak_memory_bytes"],
    }


def report(args: argparse.Namespace, source: ModelSource, rows: list[dict]) -> None:
    print(
        f"\n{source.name}: {source.shape.num_parameters / 1e9:.2f}B parameters, seq {args.seq_len}, batch "
        f"{args.batch_size}, {args.sharding_strategy}, {args.steps} timed steps"
    )
    print("| trainer | tokens/s/GPU | MFU | peak memory | activation checkpointing | compile |")
    print("|---|---:|---:|---:|---|---|")
    for row in rows:
        speed = row["tokens_per_second_per_gpu"]
        mfu = "n/a (unknown chip: pass --peak-tflops)" if row["mfu"] is None else f"{100 * row['mfu']:.1f}%"
        peak = "" if row["peak_memory_bytes"] is None else f"{row['peak_memory_bytes'] / 2**30:.1f} GiB"
        print(
            f"| {row['trainer']} | {'' if speed is None else f'{speed:,.0f}'} | {'' if speed is None else mfu} | "
            f"{peak} | {row['activation_checkpointing']} | {'yes' if row['compile'] else 'no'} |"
        )
    if args.dry_run:
        print("(dry run on CPU: the figures say nothing about a GPU)")


if __name__ == "__main__":
    main()
