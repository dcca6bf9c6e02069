"""Refuse invalid runs before any work: every message names the flag and the value and says what is allowed.

Torch-free. `trainer.main` calls `validate` after resolving the device and the model's shape, before the
process group, the model or any checkpoint exists.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from trainer.checkpoint.layout import incompatibility, latest_checkpoint, read_meta
from trainer.config import TrainConfig
from trainer.data.tokenizer_bytes import BYTE_VOCAB_SIZE
from trainer.env import DistEnv
from trainer.model.source import BYTE_TOKENIZER, ModelSource
from trainer.parallel.plan import make_plan

LOCAL_DATA_SUFFIXES = (".jsonl", ".json", ".txt")


def is_local_dataset(dataset: str) -> bool:
    """A dataset value meant as a file (an HF dataset id is 'name' or 'owner/name' without a file suffix)."""
    return dataset.endswith(LOCAL_DATA_SUFFIXES) or dataset.startswith((".", "/", "~")) or dataset.count("/") > 1


def _positive(config: TrainConfig) -> list[str]:
    checks = {
        "--steps": config.schedule.steps,
        "--batch-size": config.schedule.batch_size,
        "--seq-len": config.data.seq_len,
        "--log-every": config.metrics.log_every,
        "--keep-checkpoints": config.checkpoint.keep,
        "--lr": config.optim.lr,
        "--checkpoint-threads": config.checkpoint.threads,
        "--timeout-minutes": config.parallel.timeout_minutes,
        "--checkpoint-timeout-minutes": config.checkpoint.timeout_minutes,
    }
    if config.schedule.global_batch_size is not None:
        checks["--global-batch-size"] = config.schedule.global_batch_size
    if config.metrics.peak_tflops is not None:
        checks["--peak-tflops"] = config.metrics.peak_tflops
    errors = [f"{flag} {value}: must be positive" for flag, value in checks.items() if value <= 0]
    for flag, value in {
        "--warmup-steps": config.optim.warmup_steps,
        "--checkpoint-every": config.checkpoint.every,
        "--weight-decay": config.optim.weight_decay,
        "--grad-clip": config.optim.grad_clip,
        "--checkpoint-stop-wait-seconds": config.checkpoint.stop_wait_s,
    }.items():
        if value < 0:
            errors.append(f"{flag} {value}: must not be negative")
    if not 0 <= config.metrics.port <= 65535:
        errors.append(f"--metrics-port {config.metrics.port}: must be 0 (off) or a TCP port")
    return errors


def _schedule(config: TrainConfig) -> list[str]:
    optim, errors = config.optim, []
    if optim.warmup_steps > config.schedule.steps:
        errors.append(f"--warmup-steps {optim.warmup_steps}: exceeds --steps {config.schedule.steps}")
    if optim.min_lr is not None and optim.lr_schedule == "constant":
        errors.append(f"--min-lr {optim.min_lr}: has no effect with --lr-schedule constant")
    if optim.min_lr is not None and not 0 <= optim.min_lr <= optim.lr:
        errors.append(f"--min-lr {optim.min_lr}: must be between 0 and --lr {optim.lr}")
    return errors


def _parallel(config: TrainConfig, env: DistEnv, device_type: str) -> list[str]:
    parallel, errors = config.parallel, []
    if parallel.replicate_groups is not None and parallel.sharding_strategy != "HYBRID_SHARD":
        errors.append(
            f"--replicate-groups {parallel.replicate_groups}: only applies to --sharding-strategy HYBRID_SHARD, "
            f"not {parallel.sharding_strategy}"
        )
    try:
        make_plan(config, env)
    except ValueError as error:
        errors.append(str(error))
    if parallel.device == "cuda" and device_type != "cuda":
        errors.append("--device cuda: no CUDA device is available")
    if parallel.fp8 and not parallel.compile:
        # torchao's FP8 linears cast and scale in separate kernels unless torch.compile fuses them (torchtitan's
        # docs/float8.md: compile is "required for competitive performance").
        errors.append("--fp8: needs --compile (without it FP8 training is slower than bf16)")
    if parallel.fp8 and device_type != "cuda":
        errors.append(f"--fp8: needs a CUDA GPU with FP8 tensor cores; this run is on {device_type}")
    elif parallel.fp8 and importlib.util.find_spec("torchao") is None:
        errors.append("--fp8: needs the torchao package, which is not installed")
    return errors


def _model_and_data(config: TrainConfig, source: ModelSource) -> list[str]:
    errors, shape = [], source.shape
    if config.data.seq_len > shape.max_position_embeddings:
        errors.append(
            f"--seq-len {config.data.seq_len}: exceeds the model's max_position_embeddings "
            f"{shape.max_position_embeddings} ({source.name})"
        )
    tokenizer = config.model.tokenizer or source.default_tokenizer()
    if tokenizer == BYTE_TOKENIZER and shape.vocab_size < BYTE_VOCAB_SIZE:
        errors.append(f"--tokenizer byte: needs {BYTE_VOCAB_SIZE} ids but {source.name} has {shape.vocab_size}")
    dataset = config.data.dataset
    if dataset != "synthetic" and is_local_dataset(dataset) and not Path(dataset).expanduser().is_file():
        errors.append(f"--dataset {dataset}: no such file")
    if dataset == "synthetic" and config.data.dataset_format not in ("auto", "text"):
        errors.append(f"--dataset-format {config.data.dataset_format}: the synthetic dataset is plain text")
    return errors


def _checkpoint(config: TrainConfig, source: ModelSource) -> list[str]:
    directory = config.checkpoint.directory
    if directory is None:
        return (
            [f"--checkpoint-every {config.checkpoint.every}: needs --checkpoint-dir"] if config.checkpoint.every else []
        )
    if Path(directory).exists() and not Path(directory).is_dir():
        return [f"--checkpoint-dir {directory}: exists and is not a directory"]
    latest = latest_checkpoint(directory)
    if latest is None:
        return []
    _, path = latest
    reason = incompatibility(read_meta(path), source.shape)
    if reason:
        return [f"--checkpoint-dir {directory}: checkpoint {path.name} is from an incompatible model ({reason})"]
    return []


def validate(config: TrainConfig, env: DistEnv, device_type: str, source: ModelSource) -> list[str]:
    """Every reason the run cannot start; empty when it can."""
    return (
        _positive(config)
        + _schedule(config)
        + _parallel(config, env, device_type)
        + _model_and_data(config, source)
        + _checkpoint(config, source)
    )
