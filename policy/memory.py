"""The job's memory per GPU, from the sizing model, fits the GPU of its node type.

Why mandatory: a job that cannot fit fails with CUDA out-of-memory only after the nodes are up, the image pulled
and the model downloaded: tens of minutes of a 16-node fleet. The model (sizing/estimate.py) is the one the
config validation and `python -m sizing` use, so the pack, the CLI and the PR summary agree.

The job is read from the PyTorchJob itself (trainer flags, replicas, node selector), or from a TrainJob's runtime,
which holds its pod template, not from the stack config:
the policy checks what would be deployed. An elastic job is checked at its smallest size (minReplicas), where
each GPU holds the largest shard.

A job the policy cannot size (a value unknown during the preview, no container running the trainer, flags the
trainer refuses, a model sizing/ does not know by name) is "not checked": a violation that says what is missing.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policy.hf_token import TOKEN_LITERAL
from policy.jobs.registry import DEFAULT_JOB_TYPE, reader_for
from policy.props import as_int, get, has_unknown, is_unknown, not_checked
from sizing.catalog import CATALOG, InstanceType
from trainer.base.flags.config import TrainConfig, parse_args
from trainer.base.model.presets import find_shape

TRAINER_MODULE = "trainer"


@dataclass(frozen=True)
class JobShape:
    """What the sizing needs to know about a training job."""

    train: TrainConfig
    instance: InstanceType
    nodes: int  # the fewest nodes the job may run on
    gpus_per_node: int


class UnsizedError(Exception):
    """The job cannot be sized; the message says why and how to make it sizable."""

    def __init__(self, what: str, remedy: str):
        super().__init__(not_checked(what, remedy))


def trainer_argv(container: Mapping[str, Any]) -> list[str] | None:
    """The arguments after `-m trainer` in the container's command and args (torchrun or python launching it);
    None when the container does not run the trainer. Raises UnsizedError where a part of its command is unknown."""
    command, args = get(container, "command"), get(container, "args")
    if has_unknown(command) or has_unknown(args):
        raise UnsizedError(
            f"the command of container {get(container, 'name')!r} is unknown during this preview",
            "write the trainer's command and flags as literals",
        )
    words = [*(command or []), *(args or [])]
    if any(not isinstance(w, str) for w in words):
        return None
    for index in range(len(words) - 1):
        if words[index] == "-m" and words[index + 1] == TRAINER_MODULE:
            return words[index + 2 :]
    return None


def parse_trainer_argv(argv: Sequence[str]) -> TrainConfig:
    """The trainer's own parser (trainer/base/flags/config.py, torch-free). Where the trainer itself would refuse the
    flags (argparse exits) the job cannot be sized: UnsizedError with argparse's last line."""
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors):
        try:
            return parse_args(list(argv))
        except SystemExit:
            reason = (errors.getvalue().strip().splitlines() or ["refused"])[-1]
    raise UnsizedError(f"the trainer's parser refuses the job's flags ({quotable(reason)})", "fix the flags")


def quotable(refusal: str) -> str:
    """argparse's refusal, fit for a preview comment: an unrecognised argument's values are left out (a pasted
    token would be one) and so is anything shaped like a Hugging Face token."""
    head, marker, rest = refusal.partition("unrecognized arguments:")
    if marker:
        flags = [word for word in rest.split() if word.startswith("-")]
        refusal = f"{head}{marker} {' '.join(flags) or '(values left out)'}"
    return TOKEN_LITERAL.sub("hf_... (a token, left out)", refusal)


def job_shape(props: Mapping[str, Any], resource_type: str = DEFAULT_JOB_TYPE) -> JobShape:
    """The shape of a PyTorchJob (or a TrainJob's runtime: any object policy/jobs/ reads) whose replicas run the
    trainer on one catalog instance type, at the fewest nodes its reader finds (a runtime's are its mlPolicy.numNodes:
    a TrainJob has no elastic range). UnsizedError where any of it cannot be read."""
    reader = reader_for(resource_type)
    assert reader is not None, f"{resource_type} holds no job's pods"
    found_in = reader.replicas(props)
    unknown = [r.role for r in found_in if is_unknown(r.pod_spec) or is_unknown(get(r.pod_spec, "containers"))]
    if unknown or (not found_in and has_unknown(get(props, "spec"))):
        raise UnsizedError(
            f"the pods of {', '.join(unknown) or 'the job'} are unknown during this preview",
            "build the pod template from values known before anything is created",
        )
    found = [r for r in found_in if any(trainer_argv(c) is not None for c in r.containers)]
    if not found:
        raise UnsizedError(
            f"no container runs `python -m {TRAINER_MODULE}`, so the job's memory cannot be estimated",
            "run the project's trainer, or lower this policy to advisory in the pack's config for a job of your own",
        )
    types = [r.instance_type for r in found]
    if any(is_unknown(t) or t not in CATALOG for t in types):
        raise UnsizedError(
            f"the pods' instance type ({', '.join(map(repr, types))}) is unknown or not in sizing/catalog.py",
            "pin the pods (node.kubernetes.io/instance-type) to a catalog type with a literal value",
        )
    instance = CATALOG[types[0]]
    argv = next(a for c in found[0].containers if (a := trainer_argv(c)) is not None)
    train = parse_trainer_argv(argv)
    counts = [r.replicas for r in found]
    minimum_path = reader.nodes_path
    minimum_raw, nproc_raw = get(props, *minimum_path), get(props, "spec", "nprocPerNode")
    if any(is_unknown(v) for v in [*counts, minimum_raw, nproc_raw]):
        raise UnsizedError(
            f"the job's replica counts, {minimum_path[-1]} or nprocPerNode are unknown during this preview",
            "give them literal values",
        )
    nodes = reader.fewest_nodes(sum(c or 0 for c in counts), minimum_raw)
    if nodes < 1:
        raise UnsizedError("the job has no replicas", "give its replicas a count")
    return JobShape(train, instance, nodes, as_int(nproc_raw) or instance.gpus)


@dataclass(frozen=True)
class MemoryEstimate:
    needed_gib: float  # per GPU at the job's smallest size: the allocator's peak, its headroom and the CUDA runtime
    gpu_memory_gib: float
    fits: bool


def estimate(shape: JobShape) -> MemoryEstimate:
    """sizing.estimate's figure for the job, the one `pulumi preview`'s config check and `python -m sizing`
    give. UnsizedError where it cannot size the job (a model known only by the config.json in its checkpoint, a
    value the sizing model refuses)."""
    from sizing import estimate as sizing  # imported here: the rest of the pack needs none of the sizing model
    from trainer.base.units import GIB

    t = shape.train
    model = find_shape(t.model.name)
    if model is None:
        raise UnsizedError(
            f"sizing/ does not know the shape of model {t.model.name!r}, so its memory per GPU cannot be estimated",
            "add its shape to trainer/base/model/presets.py, or lower this policy to advisory in the pack's config",
        )
    try:
        job = sizing.make_job(model, t, gpus=shape.nodes * shape.gpus_per_node)
    except sizing.SizingError as error:  # a value the trainer's own checks refuse too (seq len, global batch)
        raise UnsizedError(f"the sizing model refuses the job ({error})", "fix the job's flags") from error
    result = sizing.size_job(job, shape.instance, shape.nodes)
    return MemoryEstimate(result.needed_bytes / GIB, float(shape.instance.gpu_memory_gib), result.fits)


def memory_fit_violations(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    if reader_for(resource_type) is None:
        return []
    try:
        shape = job_shape(props, resource_type)
        result = estimate(shape)
    except UnsizedError as unsized:
        return [str(unsized)]
    if result.fits:
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
