"""Does the stack's job fit its fleet: the configured job sized with the sizing model (sizing/estimate.py), the
problems `parse_stack_config` reports for a job that cannot fit (with the smallest changes that would), and the
stack's `jobSizing` output.

The StackConfig half of the sizing: the model below it (sizing/) knows nothing of the stack's config.
"""

from __future__ import annotations

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
from stack.trainer_config import stack_trainer_config
from trainer.model.presets import PRESETS, find_shape
from trainer.units import GIB


def _fleet_job(config: StackConfig, **changes: Any) -> tuple[Job, InstanceType, int] | None:
    """The stack's job (with `changes` to its keys) as a sizing Job, or None when it cannot be sized here."""
    trainer, gpu = stack_trainer_config(config.job), config.gpu_nodes  # what the job's trainer runs with
    shape = find_shape(trainer.model.name)
    nodes = changes.pop("nodes", gpu.count)
    instance = gpu.instance
    if shape is None or nodes < 1:
        return None  # a model known only by its config.json in the image, or no GPU nodes: nothing to size
    values = {
        "seq_len": trainer.data.seq_len,
        "batch_size": trainer.schedule.batch_size,
        "global_batch_size": trainer.schedule.global_batch_size,
        "sharding_strategy": trainer.parallel.sharding_strategy,
        "mixed_precision": trainer.parallel.mixed_precision,
        "activation_checkpointing": trainer.parallel.activation_checkpointing,
        "lora_rank": trainer.lora.rank,
        "lora_targets": tuple(trainer.lora.target_list()),
        "compile": trainer.parallel.compile,
        "all_reduce_dtype": trainer.parallel.all_reduce_dtype,
        **changes,
    }
    if values["sharding_strategy"] != "HYBRID_SHARD":  # a change away from HSDP leaves nothing to all-reduce in bf16
        values["all_reduce_dtype"] = "fp32"
    try:
        return make_job(shape, gpus=nodes * instance.gpus, **values), instance, nodes
    except SizingError:
        return None  # the config's own checks report a bad value; a candidate change that breaks one is no answer


def stack_sizing(
    config: StackConfig, assumptions: Assumptions | None = None, nodes: int | None = None
) -> Sizing | None:
    """The sizing of the stack's configured job (on `nodes`, default gpuNodes.count), or None when its model's
    shape is not known here."""
    fleet = _fleet_job(config, nodes=nodes or config.gpu_nodes.count)
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


def sizing_summary(config: StackConfig) -> dict[str, Any] | None:
    """A stack output: the configured job's memory, speed and checkpoint storage in a few figures (None when not
    sizeable)."""
    sizing = stack_sizing(config)
    if sizing is None:
        return None
    speed, efficiency = sizing.throughput, sizing.scaling_efficiency
    storage = stack_storage(config)
    return {
        "shardingStrategy": sizing.job.sharding_strategy,
        "activationCheckpointing": sizing.job.activation_checkpointing,
        "compile": sizing.job.compile,
        "allReduceDtype": sizing.job.all_reduce_dtype,
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
LORA_CHANGE = (f"job.lora.rank: {SUGGESTED_LORA_RANK}", {"lora_rank": SUGGESTED_LORA_RANK})
"""Training LoRA adapters instead of every weight: the base frozen in the compute dtype, no gradients or AdamW
state for it. It changes what is trained, so it is offered beside, not instead of, the changes that keep full
fine-tuning."""


def _candidate_changes(config: StackConfig) -> list[tuple[str, dict[str, Any]]]:
    """Single-key changes that lower memory, cheapest first: checkpointing, strategy, batch, LoRA instead of full
    fine-tuning, then more nodes."""
    job, gpu, fewest = config.job, config.gpu_nodes, config.fewest_nodes
    order: list[str] = list(CHECKPOINTING)
    candidates = [
        (f"job.activationCheckpointing: {mode}", {"activation_checkpointing": mode})
        for mode in order[order.index(job.activation_checkpointing) + 1 :]
    ]
    if job.sharding_strategy != "FULL_SHARD":
        candidates.append(("job.shardingStrategy: FULL_SHARD", {"sharding_strategy": "FULL_SHARD"}))
    candidates += [(f"job.batchSize: {b}", {"batch_size": b}) for b in range(job.batch_size - 1, 0, -1)]
    if not job.lora.rank:
        candidates.append(LORA_CHANGE)
    if fewest < gpu.count:  # elastic: a larger minimum is the change, up to the nodes there are
        return candidates + [(f"job.minNodes: {n}", {"nodes": n}) for n in range(fewest + 1, gpu.count + 1)]
    return candidates + [(f"gpuNodes.count: {n}", {"nodes": n}) for n in range(gpu.count + 1, MAX_NODES_SUGGESTED + 1)]


def _fitting_changes(config: StackConfig) -> list[str]:
    found: list[str] = []
    seen_keys: set[str] = set()
    for label, change in _candidate_changes(config):
        key = label.split(":")[0]
        if key in seen_keys:
            continue  # the smallest fitting change per key only
        fleet = _fleet_job(config, **{"nodes": config.fewest_nodes, **change})
        if fleet is None:
            continue
        sizing = size_job(*fleet)
        if sizing.fits:
            seen_keys.add(key)
            found.append(f"{label} ({sizing.needed_bytes / GIB:.1f} GiB)")
    return found


def _combined_change(config: StackConfig) -> str | None:
    """When no single change fits: every memory-saving setting at once, on the fewest nodes that then fit."""
    job, gpu = config.job, config.gpu_nodes
    change: dict[str, Any] = {"activation_checkpointing": "full", "sharding_strategy": "FULL_SHARD", "batch_size": 1}
    labels = {
        "activation_checkpointing": "job.activationCheckpointing: full",
        "sharding_strategy": "job.shardingStrategy: FULL_SHARD",
        "batch_size": "job.batchSize: 1",
    }
    current: dict[str, Any] = {
        "activation_checkpointing": job.activation_checkpointing,
        "sharding_strategy": job.sharding_strategy,
    }
    current["batch_size"] = job.batch_size
    wanted = [labels[key] for key, value in change.items() if current[key] != value]
    fewest = config.fewest_nodes
    key = "job.minNodes" if fewest < gpu.count else "gpuNodes.count"
    # Where full fine-tuning needs more nodes than LoRA (a 70B model on one node), both are named: LoRA first.
    lora = None
    if not job.lora.rank:
        label, lora_change = LORA_CHANGE
        fleet = _fleet_job(config, nodes=fewest, **change, **lora_change)
        if fleet is not None and (sizing := size_job(*fleet)).fits:
            lora = f"{', '.join([*wanted, label])} ({sizing.needed_bytes / GIB:.1f} GiB)"
    for nodes in range(fewest, (gpu.count if fewest < gpu.count else MAX_NODES_SUGGESTED) + 1):
        fleet = _fleet_job(config, nodes=nodes, **change)
        if fleet is not None and (sizing := size_job(*fleet)).fits:
            node_change = [f"{key}: {nodes}"] if nodes != fewest else []
            full = f"{', '.join(wanted + node_change)} ({sizing.needed_bytes / GIB:.1f} GiB)"
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


def stack_host_staging(config: StackConfig, nodes: int | None = None, **changes: Any) -> HostStaging | None:
    """A node's host memory at the job's background saves (on `nodes`, default gpuNodes.count, with `changes` to its
    keys); None when the job cannot be sized here."""
    fleet = _fleet_job(config, nodes=nodes or config.gpu_nodes.count, **changes)
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
        label, change = LORA_CHANGE
        staging = stack_host_staging(config, nodes=fewest, **change)
        if staging is not None and staging.fits:
            fixes.append(f"{label} ({staging.needed / GIB:.1f} GiB)")
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
