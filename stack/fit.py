"""Does the stack's job fit its fleet: the job sized with the sizing model, the smallest changes that would make it
fit, and the `jobSizing` output. The sizing model is sizing/estimate.py; `parse_stack_config` reports a job that
cannot fit as problems with those changes.

The StackConfig half of the sizing: the model below it (sizing/) knows nothing of the stack's config.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from sizing.catalog import CATALOG, InstanceType
from sizing.estimate import (
    MAX_NODES_SUGGESTED,
    RunTime,
    Sizing,
    SizingError,
    Validation,
    make_job,
    run_time,
    size_job,
)
from sizing.fsx import (
    KEEP_CHECKPOINTS,
    StorageEstimate,
    checkpoint_wait_warning,
    estimate_storage,
    storage_problem,
    storage_summary,
)
from sizing.host_memory import PAGE_CACHE_FRACTION, RANK_PROCESS_BYTES, HostStaging, host_staging
from sizing.memory import CHECKPOINTING, Job
from sizing.throughput import Assumptions
from stack.config import StackConfig
from stack.fields import JOB_OPTIONS
from stack.trainer_config import stack_trainer_config
from trainer.base.flags.config import TrainConfig
from trainer.base.flags.options import by_path, value_at, with_values, without_stray_options
from trainer.base.model.presets import PRESETS, find_shape
from trainer.base.units import GIB


@dataclass(frozen=True)
class Change:
    """A candidate change to the stack's job: `label` as the user would write it, the trainer options it sets (by
    path, trainer/base/flags/config.py) and the nodes it runs on (None: gpuNodes.count)."""

    label: str
    options: Mapping[str, object] = field(default_factory=dict)
    nodes: int | None = None

    def __post_init__(self) -> None:
        unknown = set(self.options) - set(by_path(TrainConfig))
        if unknown:
            raise ValueError(f"not trainer options: {', '.join(sorted(unknown))}")

    def key(self) -> str:
        return self.label.split(":")[0]

    def with_nodes(self, nodes: int) -> Change:
        return replace(self, nodes=nodes)

    def plus(self, other: Change) -> Change:
        return Change(f"{self.label}, {other.label}", {**self.options, **other.options}, other.nodes or self.nodes)


NO_CHANGE = Change("")


def _fleet_job(config: StackConfig, change: Change = NO_CHANGE) -> tuple[Job, InstanceType, int] | None:
    """The stack's job with `change` as a sizing Job, or None when it cannot be sized here."""
    gpu = config.gpu_nodes
    # What the job's trainer runs with, changed; an option only HYBRID_SHARD takes goes back to its default when the
    # change is away from it.
    trainer = without_stray_options(with_values(stack_trainer_config(config.job), change.options))
    shape = find_shape(trainer.model.name)
    nodes = gpu.count if change.nodes is None else change.nodes
    instance = gpu.instance
    if shape is None or nodes < 1:
        return None  # a model known only by its config.json in the image, or no GPU nodes: nothing to size
    try:
        return make_job(shape, trainer, gpus=nodes * instance.gpus), instance, nodes
    except SizingError:
        return None  # the config's own checks report a bad value; a candidate change that breaks one is no answer


def stack_sizing(
    config: StackConfig, assumptions: Assumptions | None = None, nodes: int | None = None
) -> Sizing | None:
    """The sizing of the stack's configured job (on `nodes`, default gpuNodes.count), or None when its model's
    shape is not known here."""
    fleet = _fleet_job(config, NO_CHANGE.with_nodes(nodes or config.gpu_nodes.count))
    return size_job(*fleet, assumptions) if fleet else None


def stack_storage(config: StackConfig) -> StorageEstimate | None:
    """The job's checkpoints on the stack's FSx file system; None without one (a claim of the user's, or an emptyDir
    on one node: the trainer checks the free space there itself) or for a model not known here."""
    job, storage = config.job, config.storage
    shape = find_shape(job.model)
    if not job.enabled or shape is None or not storage.fsx or job.checkpoint_claim is not None:
        return None
    return estimate_storage(
        shape,
        pretrained=job.model not in PRESETS,  # a preset is randomly initialised: no weights to stage
        capacity_gib=storage.fsx_capacity_gib,
        per_tib=storage.fsx_throughput_per_tib,
        lora_rank=job.lora.rank,
        lora_targets=tuple(job.lora.targets),
        # --keep-best's checkpoint stays beside the newest ones whatever its age (trainer/checkpoint/checkpointer.py)
        keep=KEEP_CHECKPOINTS + (1 if job.validation.keep_best else 0),
    )


def checkpoint_timeout_minutes(config: StackConfig) -> int | None:
    """The trainer's --checkpoint-timeout-minutes for the stack's file system, or None (the trainer's default)."""
    storage = stack_storage(config)
    return storage.timeout_minutes() if storage else None


def checkpoint_warning(config: StackConfig) -> str | None:
    """A preview warning when the job's saves come faster than its file system writes them (see
    checkpoint_wait_warning); None when they do not, or when the job cannot be sized."""
    storage, sizing = stack_storage(config), stack_sizing(config)
    if storage is None or sizing is None or sizing.throughput is None:
        return None
    return checkpoint_wait_warning(storage, sizing.throughput.step_s, config.job.checkpoint_every)


# The speed choices jobSizing reports, by their job.* keys.
SPEED_KEYS = ("shardingStrategy", "activationCheckpointing", "compile", "allReduceDtype")


def sizing_summary(config: StackConfig) -> dict[str, Any] | None:
    """A stack output: the configured job's memory, speed and checkpoint storage in a few figures (None when not
    sizeable)."""
    sizing = stack_sizing(config)
    if sizing is None:
        return None
    speed, efficiency = sizing.throughput, sizing.scaling_efficiency
    storage = stack_storage(config)
    sized = without_stray_options(stack_trainer_config(config.job))  # the options the sizing sized, as _fleet_job
    return {
        **{key: value_at(sized, JOB_OPTIONS[key].path) for key in SPEED_KEYS},
        "peakAllocatedGiB": round(sizing.memory.total / GIB, 1),
        "neededGiB": round(sizing.needed_bytes / GIB, 1),
        "gpuMemoryGiB": sizing.instance.gpu_memory_gib,
        "fits": sizing.fits,
        "tokensPerSecond": round(speed.tokens_per_second) if speed else None,
        "mfu": round(speed.mfu, 3) if speed else None,
        "scalingEfficiency": round(efficiency, 3) if efficiency is not None else None,
        "storage": (
            storage_summary(storage, speed.step_s if speed else None, config.job.checkpoint_every) if storage else None
        ),
        "time": run_time_summary(stack_run_time(config, sizing)),
        "hostMemory": host_summary(stack_host_staging(config)),
    }


def stack_validation(config: StackConfig) -> Validation:
    """job.validation as the sizing times it, over job.steps; the data sets' sizes are not known to the stack."""
    validation = stack_trainer_config(config.job).validation  # the flags the job's trainer runs with
    return Validation(
        steps=config.job.steps,
        every=validation.every,
        split=validation.split,
        separate_dataset=validation.dataset is not None,
    )


def stack_run_time(config: StackConfig, sizing: Sizing | None = None) -> RunTime | None:
    """The configured job's wall time, its evaluations of the held-out set included; None when not sizeable."""
    sizing = sizing or stack_sizing(config)
    return run_time(sizing, stack_validation(config)) if sizing else None


def run_time_summary(time: RunTime | None) -> dict[str, Any] | None:
    """jobSizing's time: a step, the run, and one evaluation with the held-out tokens it was timed for."""
    if time is None:
        return None
    evaluation = time.evaluation
    return {
        "stepTimeS": round(time.step_s, 3),
        "stepTimeWithEvaluationS": round(time.step_with_evaluation_s, 3),
        "runHours": round(time.run_s / 3600, 2),
        "evaluation": (
            {
                "evaluations": time.evaluations,
                "secondsEach": round(evaluation.evaluation_s, 1),
                "heldOutTokens": evaluation.held_out_tokens,
                "heldOutTokensFrom": time.held_out_basis,
            }
            if evaluation
            else None
        ),
    }


SUGGESTED_LORA_RANK = 16  # torchtune's and llama-recipes' LoRA recipes train ranks 8 to 16
LORA_CHANGE = Change(f"job.lora.rank: {SUGGESTED_LORA_RANK}", {"lora.rank": SUGGESTED_LORA_RANK})
"""Training LoRA adapters instead of every weight: the base frozen in the compute dtype, no gradients or AdamW
state for it. It changes what is trained, so it is offered beside, not instead of, the changes that keep full
fine-tuning."""


def _checkpointing(mode: str) -> Change:
    return Change(f"job.activationCheckpointing: {mode}", {"parallel.activation_checkpointing": mode})


FULL_SHARD = Change("job.shardingStrategy: FULL_SHARD", {"parallel.sharding_strategy": "FULL_SHARD"})


def _batch(size: int) -> Change:
    return Change(f"job.batchSize: {size}", {"schedule.batch_size": size})


def _nodes(key: str, nodes: int) -> Change:
    return Change(f"{key}: {nodes}", nodes=nodes)


def _candidate_changes(config: StackConfig) -> list[Change]:
    """Single-key changes that lower memory, cheapest first: checkpointing, strategy, batch, LoRA instead of full
    fine-tuning, then more nodes. Each runs on the fewest nodes the job runs on unless it changes them."""
    job, gpu, fewest = config.job, config.gpu_nodes, config.fewest_nodes
    order: list[str] = list(CHECKPOINTING)
    candidates = [_checkpointing(mode) for mode in order[order.index(job.activation_checkpointing) + 1 :]]
    if job.sharding_strategy != "FULL_SHARD":
        candidates.append(FULL_SHARD)
    candidates += [_batch(b) for b in range(job.batch_size - 1, 0, -1)]
    if not job.lora.rank:
        candidates.append(LORA_CHANGE)
    candidates = [c.with_nodes(fewest) for c in candidates]
    if fewest < gpu.count:  # elastic: a larger minimum is the change, up to the nodes there are
        return candidates + [_nodes("job.minNodes", n) for n in range(fewest + 1, gpu.count + 1)]
    return candidates + [_nodes("gpuNodes.count", n) for n in range(gpu.count + 1, MAX_NODES_SUGGESTED + 1)]


def _fitting_changes(config: StackConfig) -> list[str]:
    found: list[str] = []
    seen_keys: set[str] = set()
    for change in _candidate_changes(config):
        if change.key() in seen_keys:
            continue  # the smallest fitting change per key only
        fleet = _fleet_job(config, change)
        if fleet is None:
            continue
        sizing = size_job(*fleet)
        if sizing.fits:
            seen_keys.add(change.key())
            found.append(f"{change.label} ({sizing.needed_bytes / GIB:.1f} GiB)")
    return found


def _combined_change(config: StackConfig) -> str | None:
    """When no single change fits: every memory-saving setting at once, on the fewest nodes that then fit."""
    job, gpu = config.job, config.gpu_nodes
    wanted = [
        change
        for change, needed in (
            (_checkpointing("full"), job.activation_checkpointing != "full"),
            (FULL_SHARD, job.sharding_strategy != "FULL_SHARD"),
            (_batch(1), job.batch_size != 1),
        )
        if needed
    ]
    together = Change("", {k: v for c in (_checkpointing("full"), FULL_SHARD, _batch(1)) for k, v in c.options.items()})
    labels = [c.label for c in wanted]
    fewest = config.fewest_nodes
    key = "job.minNodes" if fewest < gpu.count else "gpuNodes.count"
    # Where full fine-tuning needs more nodes than LoRA (a 70B model on one node), both are named: LoRA first.
    lora = None
    if not job.lora.rank:
        fleet = _fleet_job(config, together.plus(LORA_CHANGE).with_nodes(fewest))
        if fleet is not None and (sizing := size_job(*fleet)).fits:
            lora = f"{', '.join([*labels, LORA_CHANGE.label])} ({sizing.needed_bytes / GIB:.1f} GiB)"
    for nodes in range(fewest, (gpu.count if fewest < gpu.count else MAX_NODES_SUGGESTED) + 1):
        fleet = _fleet_job(config, together.with_nodes(nodes))
        if fleet is not None and (sizing := size_job(*fleet)).fits:
            node_change = [f"{key}: {nodes}"] if nodes != fewest else []
            full = f"{', '.join(labels + node_change)} ({sizing.needed_bytes / GIB:.1f} GiB)"
            if lora and node_change:
                return f"{lora}; or, still training every weight, {full}"
            return full
    return lora


def fit_problems(config: StackConfig) -> list[str]:
    """Config problems for a job that cannot fit: its GPUs' memory (what it needs, what the GPU has, the smallest
    changes that would fit) and its checkpoint file system (what the checkpoints need, what the file system has).
    Empty when it fits or cannot be sized (job off, no nodes, or a model whose shape is only in its config.json)."""
    if not config.job.enabled:
        return []
    storage = stack_storage(config)
    problem = storage_problem(storage, config.job.model) if storage else None
    return _memory_problems(config) + _host_problems(config) + ([problem] if problem else [])


def _memory_problems(config: StackConfig) -> list[str]:
    sizing = stack_sizing(config, nodes=config.fewest_nodes)
    if sizing is None or sizing.fits:
        return []
    terms = sorted(sizing.memory.terms.items(), key=lambda item: -item[1])[:3]
    largest = ", ".join(f"{name.replace('_', ' ')} {value / GIB:.1f}" for name, value in terms)
    instance = sizing.instance
    fixes = _fitting_changes(config)
    combined = None if fixes else _combined_change(config)
    if fixes:
        advice = "smallest changes that fit: " + "; ".join(fixes)
    elif combined:
        advice = f"no single change fits; these together do: {combined}"
    else:
        larger = [t.name for t in CATALOG.values() if t.gpu_memory_gib > instance.gpu_memory_gib]
        advice = f"nothing fits on up to {MAX_NODES_SUGGESTED} nodes; expected a shorter job.seqLen" + (
            f" or an instance type with more GPU memory ({', '.join(larger)})" if larger else ""
        )
    elastic = " (job.minNodes: the fewest it runs on)" if sizing.nodes < config.gpu_nodes.count else ""
    return [
        f"fsdp-eks:job: {config.job.model} with {sizing.job.sharding_strategy} on {sizing.nodes} x {instance.name}"
        f"{elastic} "
        f"needs {sizing.needed_bytes / GIB:.1f} GiB per GPU (peak at {sizing.memory.moment}: {largest} GiB, plus "
        f"runtime and allocator headroom), more than the {instance.gpu_memory_gib} GiB of its {instance.gpu_chip}; "
        + advice
    ]


def stack_host_staging(config: StackConfig, nodes: int | None = None, change: Change = NO_CHANGE) -> HostStaging | None:
    """A node's host memory at the job's background saves (on `nodes`, default gpuNodes.count, with `change`); None
    when the job cannot be sized here."""
    fleet = _fleet_job(config, change.with_nodes(nodes or config.gpu_nodes.count))
    return host_staging(*fleet) if fleet else None


def host_summary(staging: HostStaging | None) -> dict[str, Any] | None:
    """jobSizing's host memory per node: the checkpoint's pinned staging, the ranks' processes, what the pod has."""
    if staging is None:
        return None
    return {
        "checkpointStagingGiB": round(staging.staged / GIB, 1),
        "processesGiB": round(staging.processes / GIB, 1),
        "neededGiB": round(staging.needed / GIB, 1),
        "availableGiB": round(staging.available / GIB, 1),
        "podMemoryGiB": round(staging.pod / GIB, 1),
        "fits": staging.fits,
    }


def _host_fixes(config: StackConfig) -> list[str]:
    """The fewest nodes whose share of the staging fits (each node stages 1/nodes of the checkpoint), and LoRA (whose
    checkpoints hold the adapters alone), each with the host memory it needs."""
    gpu, fewest = config.gpu_nodes, config.fewest_nodes
    key, most = ("job.minNodes", gpu.count) if fewest < gpu.count else ("gpuNodes.count", MAX_NODES_SUGGESTED)
    fixes: list[str] = []
    for nodes in range(fewest + 1, most + 1):
        staging = stack_host_staging(config, nodes=nodes)
        if staging is not None and staging.fits:
            fixes.append(f"{key}: {nodes} ({staging.needed / GIB:.1f} GiB)")
            break
    if not config.job.lora.rank:
        staging = stack_host_staging(config, nodes=fewest, change=LORA_CHANGE)
        if staging is not None and staging.fits:
            fixes.append(f"{LORA_CHANGE.label} ({staging.needed / GIB:.1f} GiB)")
    return fixes


def _host_problems(config: StackConfig) -> list[str]:
    staging = stack_host_staging(config, nodes=config.fewest_nodes)
    if staging is None or staging.fits:
        return []
    instance = config.gpu_nodes.instance
    fixes = _host_fixes(config)
    larger = [t.name for t in CATALOG.values() if t.memory_gib > instance.memory_gib and t.gpus >= instance.gpus]
    advice = (
        "smallest changes that fit: " + "; ".join(fixes)
        if fixes
        else f"nothing fits on up to {MAX_NODES_SUGGESTED} nodes; expected an instance type with more memory"
        + (f" ({', '.join(larger)})" if larger else "")
    )
    elastic = " (job.minNodes: the fewest it runs on)" if config.fewest_nodes < config.gpu_nodes.count else ""
    return [
        f"fsdp-eks:job: {config.job.model} with {config.job.sharding_strategy} on {config.fewest_nodes} x "
        f"{instance.name}{elastic}: a background checkpoint save stages {staging.staged / GIB:.1f} GiB per node in "
        f"pinned host memory, which with {instance.gpus} rank{'s' if instance.gpus > 1 else ''} at "
        f"{RANK_PROCESS_BYTES / GIB:.0f} GiB each needs "
        f"{staging.needed / GIB:.1f} GiB, more than the {staging.available / GIB:.1f} GiB its worker pod has for them "
        f"(a {staging.pod / GIB:.0f} GiB limit on a {instance.memory_gib} GiB node, less {PAGE_CACHE_FRACTION:.0%} "
        f"for the page cache); " + advice
    ]
