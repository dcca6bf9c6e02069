"""`python -m sizing`: the table of memory and speed per sharding strategy, or the same as JSON."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from sizing.estimate import (
    GPU_RUNTIME_BYTES,
    PRESETS,
    Sizing,
    SizingError,
    make_job,
    resolve_instance,
    resolve_shape,
    size_job,
    strategies_for,
)
from sizing.fsx import (
    DEFAULT_FSX_THROUGHPUT_PER_TIB,
    FSX_THROUGHPUT_PER_TIB,
    StorageEstimate,
    estimate_storage,
    fsx_capacity_problem,
)
from sizing.throughput import Assumptions
from trainer.base.flags.config import SHARDING_STRATEGIES, TrainConfig
from trainer.base.flags.options import add_arguments, from_namespace, options, with_values, without_stray_options
from trainer.base.model.presets import ModelShape
from trainer.base.pod.exits import EXIT_BAD_INPUT
from trainer.base.units import GIB

# Column labels of the memory breakdown, in sizing_memory.TERMS order (runtime is shown as "needed").
TERM_LABELS = {
    "parameters": "params",
    "gradients": "grads",
    "optimizer_states": "adam m+v",
    "unsharded_parameters": "gathered",
    "unsharded_gradients": "full grads",
    "communication_buffers": "comm bufs",
    "activations": "activations",
    "loss_buffers": "loss",
    "optimizer_temporaries": "adam temp",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sizing",
        description="Memory per GPU and expected throughput of an FSDP fine-tuning job, per sharding strategy.",
    )
    parser.add_argument("--model", required=True, help="preset name (llama2-7b, ...) or hub id (meta-llama/...)")
    parser.add_argument("--instance", required=True, help="EC2 instance type from the catalog (p5.48xlarge, ...)")
    parser.add_argument("--nodes", type=int, required=True, help="number of GPU nodes")
    parser.add_argument(
        "--strategy", choices=SHARDING_STRATEGIES, action="append", help="only this strategy (repeatable)"
    )
    # The trainer's options the sizing reads (base/flags/config.py, sizing=True), with the trainer's flags and help; the
    # sequence length defaults to the model's (at most 4096) and the batch to one sequence per GPU.
    sized = [o for o in options(TrainConfig) if o.sizing]
    add_arguments(parser, sized, defaults={"data.seq_len": None, "schedule.batch_size": 1})
    parser.add_argument("--mfu", type=float, default=None, help="assumed model FLOPs utilisation (default: per chip)")
    parser.add_argument(
        "--fsx-capacity-gib", type=int, default=None, help="FSx for Lustre capacity (default: the smallest that holds "
        "the checkpoints, the staged weights and the export)"
    )  # fmt: skip
    parser.add_argument(
        "--fsx-throughput-per-tib", type=int, choices=FSX_THROUGHPUT_PER_TIB, default=DEFAULT_FSX_THROUGHPUT_PER_TIB,
        help=f"FSx for Lustre MB/s per TiB (default: {DEFAULT_FSX_THROUGHPUT_PER_TIB})",
    )  # fmt: skip
    parser.add_argument(
        "--checkpoint-every", type=int, default=None, help="steps between checkpoints, for their time per hour"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object per strategy, as a list")
    return parser


def trainer_options(args: argparse.Namespace, shape: ModelShape) -> TrainConfig:
    """The trainer's options the flags give, the sequence length at the model's (at most 4096) when not given."""
    config: TrainConfig = from_namespace(TrainConfig, args)
    seq_len = config.data.seq_len or min(4096, shape.max_position_embeddings)
    return dataclasses.replace(config, data=dataclasses.replace(config.data, seq_len=seq_len))


def storage_of(args: argparse.Namespace, config: TrainConfig) -> StorageEstimate:
    """The job's checkpoint storage: a hub id is staged (pretrained), a preset is not."""
    shape = resolve_shape(args.model)
    estimate = estimate_storage(
        shape,
        pretrained=args.model not in PRESETS,
        per_tib=args.fsx_throughput_per_tib,
        lora_rank=config.lora.rank,
        lora_targets=tuple(config.lora.target_list()),
    )
    capacity = args.fsx_capacity_gib or estimate.needed_capacity_gib
    problem = fsx_capacity_problem(capacity)
    if problem:
        raise SizingError(f"--fsx-capacity-gib {capacity} is not allowed; expected {problem}")
    return dataclasses.replace(estimate, capacity_gib=capacity)


def sizings(args: argparse.Namespace) -> list[Sizing]:
    shape, instance = resolve_shape(args.model), resolve_instance(args.instance)
    if args.nodes < 1:
        raise SizingError(f"--nodes {args.nodes} is not allowed; expected at least 1")
    if args.mfu is not None and not 0 < args.mfu <= 1:
        raise SizingError(f"--mfu {args.mfu} is not allowed; expected a fraction in (0, 1]")
    config = trainer_options(args, shape)
    storage = storage_of(args, config)
    result = []
    for strategy in args.strategy or strategies_for(args.nodes):
        # An option only HYBRID_SHARD takes (trainer/base/flags/config.py OnlyWith) goes back to its default for the
        # others.
        strategy_config = without_stray_options(with_values(config, {"parallel.sharding_strategy": strategy}))
        job = make_job(shape, strategy_config, gpus=args.nodes * instance.gpus)
        result.append(size_job(job, instance, args.nodes, Assumptions(mfu=args.mfu), storage))
    return result


def render_storage(sizing: Sizing, every: int | None) -> list[str]:
    """The checkpoint lines of the table: size, file system, save and load time, cost."""
    storage = sizing.storage
    if storage is None:
        return []
    gib = storage.checkpoint_bytes / GIB
    lines = [
        "",
        f"Checkpoints: {gib:.1f} GiB each (fp32 trained weights + AdamW moments); {storage.keep} kept + 1 being "
        "written + "
        f"{(storage.staged_bytes + storage.export_bytes) / GIB:.1f} GiB staged weights and export = "
        f"{storage.needed_bytes / GIB:.1f} GiB: FSx for Lustre of {storage.needed_capacity_gib} GiB or more",
        f"On {storage.capacity_gib} GiB at {storage.per_tib} MB/s/TiB ({storage.throughput_bytes_per_s / 1e6:,.0f} "
        f"MB/s, ${storage.cost_per_hour:.2f}/h{'' if storage.fits else ', TOO SMALL'}): a save takes "
        f"{storage.save_s / 60:.1f} min, a load {storage.load_s / 60:.1f} min "
        f"(--checkpoint-timeout-minutes {storage.timeout_minutes()})",
    ]
    speed = sizing.throughput
    if speed is not None and every:
        per_hour = storage.seconds_per_hour(speed.step_s, every) or 0.0
        lines.append(
            f"Saving in the background every {every} steps of {speed.step_s:.2f} s ({sizing.job.sharding_strategy}): "
            f"training waits {per_hour / 60:.1f} min of every hour for saves (none from "
            f"{storage.steps_per_save(speed.step_s)} steps between saves)"
        )
    return lines


def render_table(results: list[Sizing], every: int | None = None) -> str:
    first = results[0]
    job, instance = first.job, first.instance
    lines = [
        f"{job.shape.hf_id or job.shape.name} ({job.shape.num_parameters / 1e9:.2f}B parameters) on {first.nodes} x "
        f"{instance.name} ({first.gpus} x {instance.gpu_chip}, {instance.gpu_memory_gib} GiB each)",
        f"seq {job.seq_len}, batch {job.batch_size} per GPU, {job.grad_accum} micro step(s) per optimizer step, "
        f"{job.mixed_precision}, activation checkpointing {job.activation_checkpointing}"
        + (f", LoRA rank {job.lora_rank} on {','.join(job.lora_targets)} (the base frozen)" if job.lora_rank else "")
        + (", compiled" if job.compile else "")
        + (", HYBRID_SHARD's all-reduce in bf16" if any(r.job.all_reduce_dtype == "bf16" for r in results) else ""),
        "",
        f"{'strategy':<14} {'peak alloc':>10} {'needed':>8} {'fits':>4} {'tokens/s':>11} {'per GPU':>8} "
        f"{'MFU':>6} {'step':>8} {'scaling':>8}  peak at",
    ]
    for s in results:
        t, efficiency = s.throughput, s.scaling_efficiency
        speed = (
            f"{t.tokens_per_second:>11,.0f} {t.tokens_per_second_per_gpu:>8,.0f} {100 * t.mfu:>5.1f}% "
            f"{t.step_s:>7.2f}s {100 * (efficiency or 0):>7.1f}%"
            if t
            else f"{'n/a (fp32)':>11} {'':>8} {'':>6} {'':>8} {'':>8}"
        )
        lines.append(
            f"{s.job.sharding_strategy:<14} {s.memory.total / GIB:>6.1f} GiB {s.needed_bytes / GIB:>8.1f} "
            f"{'yes' if s.fits else 'NO':>4} {speed}  {s.memory.moment}"
        )
    lines += ["", "Peak memory per GPU by buffer (GiB):"]
    lines.append(f"{'strategy':<14} " + " ".join(f"{label:>11}" for label in TERM_LABELS.values()))
    for s in results:
        values = " ".join(f"{s.memory.terms[name] / GIB:>11.2f}" for name in TERM_LABELS)
        lines.append(f"{s.job.sharding_strategy:<14} {values}")
    lines.append(
        f"needed = peak alloc x 1.1 (allocator headroom) + {GPU_RUNTIME_BYTES / GIB:.0f} GiB (CUDA context, NCCL); "
        "scaling = per-GPU throughput against one node. Estimates: see docs/sizing.md."
    )
    lines += render_storage(first, every)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        results = sizings(args)
    except SizingError as error:
        print(f"python -m sizing: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        print(json.dumps([s.to_dict() for s in results], indent=2))
    else:
        print(render_table(results, args.checkpoint_every))
    return 0
