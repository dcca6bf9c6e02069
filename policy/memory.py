"""The job's memory per GPU, from the sizing model, fits the GPU of its node type.

Why mandatory: a job that cannot fit fails with CUDA out-of-memory only after the nodes are up, the image pulled
and the model downloaded: tens of minutes of a 16-node fleet. The model (sizing/estimate.py) is the one the
config validation and `python -m sizing` use, so the pack, the CLI and the PR summary agree.

The job is read from the PyTorchJob itself (trainer flags, replicas, node selector), or from a TrainJob's runtime,
which holds its pod template, not from the stack config:
the policy checks what would be deployed. An elastic job is checked at its smallest size (minReplicas), where
each GPU holds the largest shard.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policy.props import as_int, get, is_unknown
from policy.pytorchjob import PYTORCHJOB, replicas
from policy.training_runtime import RUNTIME, runtime_replicas
from sizing.catalog import CATALOG, InstanceType
from trainer.config import TrainConfig, parse_args
from trainer.presets import find_shape

TRAINER_MODULE = "trainer"


@dataclass(frozen=True)
class JobShape:
    """What the sizing needs to know about a PyTorchJob."""

    train: TrainConfig
    instance: InstanceType
    nodes: int  # the fewest nodes the job may run on
    gpus_per_node: int


def trainer_argv(container: Mapping[str, Any]) -> list[str] | None:
    """The arguments after `-m trainer` in the container's command and args (torchrun or python launching it);
    None when the container does not run the trainer or a part of its command is unknown."""
    words = [*(get(container, "command") or []), *(get(container, "args") or [])]
    if any(not isinstance(w, str) for w in words):
        return None
    for index in range(len(words) - 1):
        if words[index] == "-m" and words[index + 1] == TRAINER_MODULE:
            return words[index + 2 :]
    return None


def parse_trainer_argv(argv: Sequence[str]) -> TrainConfig | None:
    """The trainer's own parser (trainer/config.py, torch-free); None where the trainer itself would refuse the
    flags (argparse exits; its usage text is not the policy's message)."""
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            return parse_args(list(argv))
        except SystemExit:
            return None


def job_shape(props: Mapping[str, Any], resource_type: str = PYTORCHJOB) -> JobShape | None:
    """The shape of a PyTorchJob (or a TrainJob's runtime) whose replicas run the trainer on one catalog instance
    type; None otherwise. A runtime's nodes are its mlPolicy.numNodes: a TrainJob has no elastic range."""
    found_in = runtime_replicas(props) if resource_type == RUNTIME else replicas(props)
    found = [r for r in found_in if any(trainer_argv(c) is not None for c in r.containers)]
    if not found or any(is_unknown(r.instance_type) or r.instance_type not in CATALOG for r in found):
        return None
    instance = CATALOG[found[0].instance_type]
    argv = next(a for c in found[0].containers if (a := trainer_argv(c)) is not None)
    train = parse_trainer_argv(argv)
    total = sum(r.replicas or 0 for r in found)
    minimum = as_int(get(props, "spec", "elasticPolicy", "minReplicas"))
    nodes = min(total, minimum) if minimum else total
    gpus = as_int(get(props, "spec", "nprocPerNode")) or instance.gpus
    if train is None or nodes < 1:
        return None
    return JobShape(train, instance, nodes, gpus)


@dataclass(frozen=True)
class MemoryEstimate:
    needed_gib: float  # per GPU at the job's smallest size: the allocator's peak, its headroom and the CUDA runtime
    gpu_memory_gib: float
    fits: bool


def estimate(shape: JobShape) -> MemoryEstimate | None:
    """sizing.estimate's figure for the job, the one `pulumi preview`'s config check and `python -m sizing`
    give; None where it cannot size the job (a model known only by the config.json in its checkpoint)."""
    from sizing import estimate as sizing  # imported here: the rest of the pack needs none of the sizing model

    t = shape.train
    model = find_shape(t.model.name)
    if model is None:
        return None
    try:
        job = sizing.make_job(
            model,
            gpus=shape.nodes * shape.gpus_per_node,
            seq_len=t.data.seq_len,
            batch_size=t.schedule.batch_size,
            global_batch_size=t.schedule.global_batch_size,
            sharding_strategy=t.parallel.sharding_strategy,
            mixed_precision=t.parallel.mixed_precision,
            activation_checkpointing=t.parallel.activation_checkpointing,
        )
    except sizing.SizingError:
        return None  # a value the trainer's own checks refuse with a better message (seq len, global batch)
    result = sizing.size_job(job, shape.instance, shape.nodes)
    return MemoryEstimate(result.needed_bytes / sizing.GIB, float(shape.instance.gpu_memory_gib), result.fits)


def memory_fit_violations(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    if resource_type not in (PYTORCHJOB, RUNTIME):
        return []
    shape = job_shape(props, resource_type)
    result = estimate(shape) if shape is not None else None
    if shape is None or result is None or result.fits:
        return []
    t = shape.train
    return [
        f"{t.model.name} with {t.parallel.sharding_strategy}, activation checkpointing "
        f"{t.parallel.activation_checkpointing}, seq len {t.data.seq_len} x batch {t.schedule.batch_size} on "
        f"{shape.nodes} x {shape.instance.name} needs about {result.needed_gib:.1f} GiB per GPU (peak, allocator "
        f"headroom and CUDA runtime), more than the {shape.instance.gpu_memory_gib} GiB of its GPUs; "
        f"`python -m sizing --model {t.model.name} --instance {shape.instance.name} --nodes {shape.nodes}` "
        "shows what would fit"
    ]
