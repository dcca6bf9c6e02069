"""Will a job fit, and how fast will it go: memory per GPU and expected throughput per sharding strategy.

    python -m sizing --model meta-llama/Llama-2-7b-hf --instance p5.48xlarge --nodes 16
    python -m sizing --model llama2-70b --instance p5.48xlarge --nodes 4 --activation-checkpointing full
    python -m sizing --model llama2-13b --instance p4de.24xlarge --nodes 2 --json

Pure Python (no torch): the stack's config validation calls `fit_problems`, so a job that cannot fit fails
`pulumi preview` with the memory it needs, what the GPU has and the smallest changes that would fit.
The memory model is sizing/memory.py, the throughput model sizing/throughput.py; docs/sizing.md
has the hand calculation for Llama 2 7B, 13B and 70B.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sizing.catalog import CATALOG, InstanceType
from sizing.memory import (
    CHECKPOINTING,
    COMPUTE_BYTES,
    STRATEGIES,
    Job,
    MemoryEstimate,
    Ranks,
    peak_memory,
)
from sizing.storage import StorageEstimate, estimate_storage, storage_problem, storage_summary
from sizing.throughput import Assumptions, ThroughputEstimate, estimate_throughput, scaling_efficiency
from trainer.presets import PRESETS, ModelShape, find_shape

if TYPE_CHECKING:
    from stack.config import StackConfig

GIB = 2**30
# Memory a GPU process holds outside PyTorch's allocator, which the trainer's `peak_memory_bytes`
# (torch.cuda.max_memory_allocated) does not see: the CUDA context (about 0.5 GiB with lazy module loading,
# CUDA 11.7+) and NCCL's communication buffers (NCCL_BUFFSIZE, 4 MiB by default, per channel and peer; with EFA
# and tens of channels about 1 GiB). An estimate: check it with nvidia-smi on the first run.
GPU_RUNTIME_BYTES = 2 * GIB
# PyTorch's caching allocator reserves more than it hands out (blocks split and cached for reuse); FSDP training
# typically reserves 5-15% above its allocated peak. Kept free so a job predicted to fit does fit.
ALLOCATOR_HEADROOM = 0.10
MAX_NODES_SUGGESTED = 64


class SizingError(ValueError):
    """A bad input to the sizing: the message names the value and what is allowed."""


@dataclass(frozen=True)
class Sizing:
    """One job on one fleet: its peak memory per GPU, whether that fits, and its expected speed."""

    job: Job
    instance: InstanceType
    nodes: int
    memory: MemoryEstimate
    """The allocator's peak per GPU (what the trainer reports as peak_memory_bytes), by buffer."""
    throughput: ThroughputEstimate | None
    """None in fp32: the catalog's peaks are bf16 tensor-core rates, and the trainer leaves TF32 off."""
    scaling_efficiency: float | None
    storage: StorageEstimate | None = None
    """Its checkpoints on an FSx for Lustre file system (sizing/storage.py), when one is given."""

    @property
    def gpus(self) -> int:
        return self.nodes * self.instance.gpus

    @property
    def needed_bytes(self) -> int:
        """Peak allocated, plus the allocator's headroom, plus the CUDA/NCCL runtime."""
        return math.ceil(self.memory.total * (1 + ALLOCATOR_HEADROOM)) + GPU_RUNTIME_BYTES

    @property
    def gpu_memory_bytes(self) -> int:
        return self.instance.gpu_memory_gib * GIB

    @property
    def fits(self) -> bool:
        return self.needed_bytes <= self.gpu_memory_bytes

    def to_dict(self) -> dict[str, Any]:
        job, t = self.job, self.throughput
        speed = {
            "tokens_per_second": t.tokens_per_second if t else None,
            "tokens_per_second_per_gpu": t.tokens_per_second_per_gpu if t else None,
            "mfu": t.mfu if t else None,
            "step_time_s": t.step_s if t else None,
            "compute_s": t.compute_s if t else None,
            "communication_s": t.communication_s if t else None,
            "exposed_communication_s": t.exposed_s if t else None,
            "scaling_efficiency": self.scaling_efficiency,
        }
        return {
            "model": job.shape.name,
            "parameters": job.shape.num_parameters,
            "instance": self.instance.name,
            "nodes": self.nodes,
            "gpus": self.gpus,
            "sharding_strategy": job.sharding_strategy,
            "mixed_precision": job.mixed_precision,
            "activation_checkpointing": job.activation_checkpointing,
            "seq_len": job.seq_len,
            "batch_size": job.batch_size,
            "grad_accum": job.grad_accum,
            "peak_moment": self.memory.moment,
            "peak_allocated_bytes": self.memory.total,
            "memory_bytes": dict(self.memory.terms),
            "runtime_bytes": GPU_RUNTIME_BYTES,
            "needed_bytes": self.needed_bytes,
            "gpu_memory_bytes": self.gpu_memory_bytes,
            "fits": self.fits,
            **speed,
            "storage": storage_summary(self.storage, t.step_s if t else None, 0) if self.storage else None,
        }


def resolve_shape(model: str) -> ModelShape:
    shape = find_shape(model)
    if shape is None:
        known = ", ".join([*PRESETS, *(s.hf_id for s in PRESETS.values() if s.hf_id)])
        raise SizingError(f"unknown model {model!r}; expected a preset name or hub id the project knows: {known}")
    return shape


def resolve_instance(name: str) -> InstanceType:
    if name not in CATALOG:
        raise SizingError(f"unknown instance type {name!r}; expected one of {', '.join(sorted(CATALOG))}")
    return CATALOG[name]


def make_job(
    shape: ModelShape,
    *,
    gpus: int,
    seq_len: int,
    batch_size: int = 1,
    global_batch_size: int | None = None,
    sharding_strategy: str = "FULL_SHARD",
    mixed_precision: str = "bf16",
    activation_checkpointing: str = "none",
) -> Job:
    """A Job with its gradient accumulation derived as the trainer does (trainer/plan.py); SizingError if bad."""
    checkpointing = activation_checkpointing
    checks = [
        (sharding_strategy in STRATEGIES, f"sharding strategy {sharding_strategy!r}", ", ".join(STRATEGIES)),
        (mixed_precision in COMPUTE_BYTES, f"mixed precision {mixed_precision!r}", ", ".join(COMPUTE_BYTES)),
        (checkpointing in CHECKPOINTING, f"checkpointing {checkpointing!r}", ", ".join(CHECKPOINTING)),
        (1 <= seq_len <= shape.max_position_embeddings, f"seq len {seq_len}", f"1..{shape.max_position_embeddings}"),
        (batch_size >= 1, f"batch size {batch_size}", "at least 1"),
        (gpus >= 1, f"{gpus} GPUs", "at least 1"),
    ]
    for ok, what, allowed in checks:
        if not ok:
            raise SizingError(f"{what} is not allowed for {shape.name}; expected {allowed}")
    per_micro_step = batch_size * gpus
    global_batch = global_batch_size or per_micro_step
    if global_batch % per_micro_step:
        raise SizingError(
            f"global batch size {global_batch} is not a multiple of batch size x GPUs ({batch_size} x {gpus})"
        )
    return Job(
        shape, seq_len, batch_size, sharding_strategy, mixed_precision, activation_checkpointing,
        grad_accum=global_batch // per_micro_step,
    )  # fmt: skip


def size_job(
    job: Job,
    instance: InstanceType,
    nodes: int,
    assumptions: Assumptions | None = None,
    storage: StorageEstimate | None = None,
) -> Sizing:
    if nodes < 1:
        raise SizingError(f"{nodes} nodes is not allowed; expected at least 1")
    ranks = Ranks(nodes * instance.gpus, instance.gpus, device="gpu")
    estimated = job.mixed_precision != "fp32"
    return Sizing(
        job=job,
        instance=instance,
        nodes=nodes,
        memory=peak_memory(job, ranks),
        throughput=estimate_throughput(job, instance, nodes, assumptions) if estimated else None,
        scaling_efficiency=scaling_efficiency(job, instance, nodes, assumptions) if estimated else None,
        storage=storage,
    )


def strategies_for(nodes: int) -> tuple[str, ...]:
    """HYBRID_SHARD replicates across nodes: on one node it is FULL_SHARD (and the config refuses it)."""
    return tuple(s for s in STRATEGIES if nodes > 1 or s != "HYBRID_SHARD")


def fewest_nodes(config: StackConfig) -> int:
    """The fewest nodes the job runs on: an elastic job (job.minNodes) may go on with fewer than gpuNodes.count,
    and then every GPU holds a larger shard."""
    return config.job.min_nodes or config.gpu_nodes.count


def _fleet_job(config: StackConfig, **changes: Any) -> tuple[Job, InstanceType, int] | None:
    """The stack's job (with `changes` to its keys) as a sizing Job, or None when it cannot be sized here."""
    job_config, gpu = config.job, config.gpu_nodes
    shape = find_shape(job_config.model)
    nodes = changes.pop("nodes", gpu.count)
    instance = gpu.instance
    if shape is None or nodes < 1:
        return None  # a model known only by its config.json in the image, or no GPU nodes: nothing to size
    values = {
        "seq_len": job_config.seq_len,
        "batch_size": job_config.batch_size,
        "global_batch_size": job_config.global_batch_size,
        "sharding_strategy": job_config.sharding_strategy,
        "mixed_precision": job_config.mixed_precision,
        "activation_checkpointing": job_config.activation_checkpointing,
        **changes,
    }
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
    )


def checkpoint_timeout_minutes(config: StackConfig) -> int | None:
    """The trainer's --checkpoint-timeout-minutes for the stack's file system, or None (the trainer's default)."""
    storage = stack_storage(config)
    return storage.timeout_minutes() if storage else None


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
    }


def _candidate_changes(config: StackConfig) -> list[tuple[str, dict[str, Any]]]:
    """Single-key changes that lower memory, cheapest first: checkpointing, strategy, batch, then more nodes."""
    job, gpu, fewest = config.job, config.gpu_nodes, fewest_nodes(config)
    order = list(CHECKPOINTING)
    candidates = [
        (f"job.activationCheckpointing: {mode}", {"activation_checkpointing": mode})
        for mode in order[order.index(job.activation_checkpointing) + 1 :]
    ]
    if job.sharding_strategy != "FULL_SHARD":
        candidates.append(("job.shardingStrategy: FULL_SHARD", {"sharding_strategy": "FULL_SHARD"}))
    candidates += [(f"job.batchSize: {b}", {"batch_size": b}) for b in range(job.batch_size - 1, 0, -1)]
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
        fleet = _fleet_job(config, **{"nodes": fewest_nodes(config), **change})
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
    current = {"activation_checkpointing": job.activation_checkpointing, "sharding_strategy": job.sharding_strategy}
    current["batch_size"] = job.batch_size
    wanted = [labels[key] for key, value in change.items() if current[key] != value]
    fewest = fewest_nodes(config)
    key = "job.minNodes" if fewest < gpu.count else "gpuNodes.count"
    for nodes in range(fewest, (gpu.count if fewest < gpu.count else MAX_NODES_SUGGESTED) + 1):
        fleet = _fleet_job(config, nodes=nodes, **change)
        if fleet is not None and (sizing := size_job(*fleet)).fits:
            node_change = [f"{key}: {nodes}"] if nodes != fewest else []
            return f"{', '.join(wanted + node_change)} ({sizing.needed_bytes / GIB:.1f} GiB)"
    return None


def fit_problems(config: StackConfig) -> list[str]:
    """Config problems for a job that cannot fit: its GPUs' memory (what it needs, what the GPU has, the smallest
    changes that would fit) and its checkpoint file system (what the checkpoints need, what the file system has).
    Empty when it fits or cannot be sized (job off, no nodes, or a model whose shape is only in its config.json)."""
    if not config.job.enabled:
        return []
    storage = stack_storage(config)
    problem = storage_problem(storage, config.job.model) if storage else None
    return _memory_problems(config) + ([problem] if problem else [])


def _memory_problems(config: StackConfig) -> list[str]:
    sizing = stack_sizing(config, nodes=fewest_nodes(config))
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
