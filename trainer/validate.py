"""Refuse invalid runs before any work: every message names the flag and the value and says what is allowed.

Torch-free. `trainer.main` calls `validate` after resolving the device and the model's shape, before the
process group, the model or any checkpoint exists.
"""

from __future__ import annotations

import re
from pathlib import Path

from trainer.base.errors import InputError
from trainer.base.flags.config import TrainConfig, config_problems
from trainer.base.flags.options import Facts
from trainer.base.flags.parallel_plan import mesh_shape
from trainer.base.hardware.fabric import preflight_flag_problems
from trainer.base.model.source import BYTE_TOKENIZER, ModelSource
from trainer.base.pod.env import DistEnv
from trainer.base.s3.inputs import DATA_SUFFIXES
from trainer.base.s3.uri import S3Uri, checkpoint_bucket_problem, is_s3_uri
from trainer.checkpoint.layout import incompatibility, latest_checkpoint, read_meta
from trainer.checks.packages import BOTO3, DATASETS, S3_CONNECTOR, TORCHAO, OptionalPackage, missing_problem
from trainer.data.tokenizer_bytes import BYTE_VOCAB_SIZE

LOCAL_DATA_SUFFIXES = DATA_SUFFIXES
# What Kubernetes leaves of a $(VAR) reference it could not expand (the Kubernetes API reference, Container `args`:
# "If a variable cannot be resolved, the reference in the input string will be unchanged").
UNEXPANDED_VARIABLE = re.compile(r"\$\([A-Za-z_][A-Za-z0-9_]*\)")


def is_local_dataset(dataset: str) -> bool:
    """A dataset value meant as a file (an HF dataset id is 'name' or 'owner/name' without a file suffix; an s3://
    data set is staged, trainer/base/s3/inputs.py)."""
    if is_s3_uri(dataset):
        return False
    return dataset.endswith(LOCAL_DATA_SUFFIXES) or dataset.startswith((".", "/", "~")) or dataset.count("/") > 1


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
    try:
        mesh_shape(config, env)
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
    elif parallel.fp8 and (problem := missing_problem("--fp8", TORCHAO)):
        errors.append(problem)
    return errors


def _model_and_data(config: TrainConfig, source: ModelSource) -> list[str]:
    errors, shape = [], source.shape
    tokenizer = config.model.tokenizer or source.default_tokenizer()
    if tokenizer == BYTE_TOKENIZER and shape.vocab_size < BYTE_VOCAB_SIZE:
        errors.append(f"--tokenizer byte: needs {BYTE_VOCAB_SIZE} ids but {source.name} has {shape.vocab_size}")
    dataset = config.data.dataset
    if dataset != "synthetic" and is_local_dataset(dataset) and not Path(dataset).expanduser().is_file():
        errors.append(f"--dataset {dataset}: no such file")
    if dataset != "synthetic" and not is_local_dataset(dataset) and not is_s3_uri(dataset):
        errors += filter(None, [missing_problem(f"--dataset {dataset}", DATASETS)])
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
    reason = incompatibility(read_meta(path), source.shape, config.lora.settings())
    if reason:
        return [f"--checkpoint-dir {directory}: checkpoint {path.name} is from an incompatible model ({reason})"]
    return []


def uri_problem(flag: str, value: str) -> str | None:
    """Why `value` is not a usable s3:// URI for `flag`, or None."""
    unexpanded = UNEXPANDED_VARIABLE.search(value)
    if unexpanded:
        return (
            f"{flag} {value}: {unexpanded.group(0)} was not expanded (Kubernetes leaves a reference to a variable the "
            "container does not define as it is)"
        )
    try:
        S3Uri.parse(value, flag)
    except InputError as error:
        return str(error)
    return None


def _by_flag(need: tuple[str, OptionalPackage]) -> tuple[str, str]:
    return need[0], need[1].module


def _s3_packages(uris: dict[str, str]) -> list[str]:
    """Every s3:// flag needs boto3; the checkpoints' tier (--artifacts-uri, --resume-from) the S3 connector too."""
    needed = {(flag, BOTO3) for flag in uris}
    needed |= {(flag, S3_CONNECTOR) for flag in uris if flag in ("--artifacts-uri", "--resume-from")}
    found = (missing_problem(f"{flag} {uris[flag]}", package) for flag, package in sorted(needed, key=_by_flag))
    return [problem for problem in found if problem]


def _s3(config: TrainConfig) -> list[str]:
    artifacts, errors = config.artifacts, []
    uris = {"--artifacts-uri": artifacts.uri, "--resume-from": artifacts.resume_from}
    uris |= {flag: value for flag, value in (("--dataset", config.data.dataset), ("--model", config.model.name))
             if is_s3_uri(value)}  # fmt: skip
    errors += [problem for flag, value in uris.items() if value and (problem := uri_problem(flag, value))]
    errors += _s3_packages({flag: value for flag, value in uris.items() if value})
    for flag in ("--artifacts-uri", "--resume-from"):
        value = uris[flag]
        if value and not uri_problem(flag, value) and (problem := checkpoint_bucket_problem(S3Uri.parse(value).bucket)):
            errors.append(f"{flag} {value}: {problem}")
    if config.model.tokenizer and is_s3_uri(config.model.tokenizer):
        errors.append(
            f"--tokenizer {config.model.tokenizer}: not read from S3; an s3:// --model brings its own tokenizer"
        )
    every, checkpoint_every = artifacts.checkpoint_every, config.checkpoint.every
    if every > 0 and not artifacts.uri:
        errors.append(f"--s3-checkpoint-every {every}: needs --artifacts-uri")
    elif every > 0 and checkpoint_every and every % checkpoint_every:
        errors.append(f"--s3-checkpoint-every {every}: must be a multiple of --checkpoint-every {checkpoint_every}")
    if artifacts.resume_from and not config.checkpoint.directory:
        errors.append(
            f"--resume-from {artifacts.resume_from}: needs --checkpoint-dir (a checkpoint is loaded, and saved again, "
            "through it)"
        )
    if artifacts.uri and not config.checkpoint.directory:
        errors.append(
            f"--artifacts-uri {artifacts.uri}: needs --checkpoint-dir, the fast tier every checkpoint is written to "
            "before S3"
        )
    if is_s3_uri(config.data.dataset) and not config.data.cache_dir:
        errors.append(
            f"--dataset {config.data.dataset}: needs --data-cache-dir, the shared directory it is staged into once"
        )
    return errors


def _lora(config: TrainConfig) -> list[str]:
    lora, errors = config.lora, []
    if not lora.rank:
        return errors
    if lora.alpha <= 0:
        errors.append(f"--lora-alpha {lora.alpha}: must be positive")
    if config.parallel.fp8:
        # torchao would convert the adapters' own small linears as well, and FP8 buys nothing on a frozen base.
        errors.append("--fp8: not with --lora-rank (the adapters' linears are too small for FP8)")
    return errors


def _validation(config: TrainConfig) -> list[str]:
    """The held-out set's flags as far as this machine goes (their rules across flags are declared with them,
    base/flags/config.py): its file, its S3 staging, and where --keep-best keeps its checkpoint."""
    validation, errors = config.validation, []
    dataset = validation.dataset
    if dataset and is_local_dataset(dataset) and not Path(dataset).expanduser().is_file():
        errors.append(f"--val-dataset {dataset}: no such file")
    if dataset and is_s3_uri(dataset):
        if problem := uri_problem("--val-dataset", dataset):
            errors.append(problem)
        if not config.data.cache_dir:
            errors.append(f"--val-dataset {dataset}: needs --data-cache-dir, the shared directory it is staged into")
    # The stack's job always has a --checkpoint-dir (the pod's), so this one rule is the trainer's alone.
    if validation.keep_best and not config.checkpoint.directory:
        errors.append("--keep-best: needs --checkpoint-dir, where the best checkpoint is kept")
    return errors


def validate(config: TrainConfig, env: DistEnv, device_type: str, source: ModelSource) -> list[str]:
    """Every reason the run cannot start; empty when it can."""
    return (
        config_problems(config, Facts(shape=source.shape, world_size=env.world_size))
        + _schedule(config)
        + _parallel(config, env, device_type)
        + _model_and_data(config, source)
        + _checkpoint(config, source)
        + _s3(config)
        + _lora(config)
        + _validation(config)
        + preflight_flag_problems(config.preflight)
    )
