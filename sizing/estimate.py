"""Will a job fit, and how fast will it go: memory per GPU and expected throughput per sharding strategy.

    python -m sizing --model meta-llama/Llama-2-7b-hf --instance p5.48xlarge --nodes 16
    python -m sizing --model llama2-70b --instance p5.48xlarge --nodes 4 --activation-checkpointing full
    python -m sizing --model llama2-13b --instance p4de.24xlarge --nodes 2 --json

Pure Python (no torch), and below the stack's config: the stack's fit check (stack/fit.py) sizes the configured
job with these functions, so a job that cannot fit fails `pulumi preview` with the memory it needs, what the GPU
has and the smallest changes that would fit.
The memory model is sizing/memory.py, the throughput model sizing/throughput.py; docs/sizing.md
has the hand calculation for Llama 2 7B, 13B and 70B.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sizing.catalog import CATALOG, InstanceType
from sizing.fsx import StorageEstimate, storage_summary
from sizing.memory import (
    Job,
    MemoryEstimate,
    Ranks,
    peak_memory,
)
from sizing.throughput import (
    Assumptions,
    EvaluationEstimate,
    ThroughputEstimate,
    estimate_evaluation,
    estimate_throughput,
    scaling_efficiency,
)
from trainer.base.flags.config import SHARDING_STRATEGIES, TrainConfig, config_problems
from trainer.base.flags.options import Facts
from trainer.base.flags.parallel_plan import make_plan
from trainer.base.model.presets import PRESETS, ModelShape, find_shape
from trainer.base.pod.env import DistEnv
from trainer.base.units import GIB

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
    """Its checkpoints on an FSx for Lustre file system (sizing/fsx.py), when one is given."""

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
            **job.settings(),
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


def make_job(shape: ModelShape, config: TrainConfig, *, gpus: int) -> Job:
    """What one rank of the trainer trains with the options `config` on `gpus` GPUs: gradient accumulation derived as
    the trainer derives it (trainer/base/flags/parallel_plan.py). SizingError, naming the flag, for what the trainer's
    declared rules refuse with this model and world size."""
    problems = config_problems(config, Facts(shape=shape, world_size=gpus if gpus >= 1 else None))
    if gpus < 1:
        problems.append(f"{gpus} GPUs: expected at least 1")
    if problems:
        raise SizingError("; ".join(problems))
    # The trainer's own plan; gradient accumulation depends on the world size alone, not on how it splits in nodes.
    try:
        plan = make_plan(config, DistEnv(world_size=gpus, local_world_size=gpus))
    except ValueError as error:
        raise SizingError(str(error)) from None
    return Job.of(shape, config, plan.grad_accum)


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
    return tuple(s for s in SHARDING_STRATEGIES if nodes > 1 or s != "HYBRID_SHARD")


# A separate validation data set (--val-dataset) has a size the sizing cannot see: it is assumed to hold this share of
# the tokens the run trains, dialogsum's ratio of validation to training dialogues (500 to 12,460, its data set card).
ASSUMED_VAL_DATASET_SHARE = 500 / 12_460


@dataclass(frozen=True)
class Validation:
    """The trainer's validation flags (trainer/base/flags/config.py ValidationConfig) as far as the time of a run
    goes."""

    steps: int
    every: int = 0
    """--eval-every: 0 evaluates at the last step only."""
    split: float = 0.0
    """--val-split: this share of the data set's records is held out."""
    separate_dataset: bool = False
    """--val-dataset: the held-out set is a data set of its own."""
    dataset_tokens: int | None = None
    """The tokens of the data set the held-out set comes from (the val data set's with separate_dataset), when known."""

    @property
    def evaluations(self) -> int:
        """Evaluations in a run: at every multiple of `every` and at the last step, which may be one of them."""
        if self.every <= 0:
            return 1
        return self.steps // self.every + (1 if self.steps % self.every else 0)


def held_out_tokens(validation: Validation, trained_tokens: int) -> tuple[int, str]:
    """(the held-out set's tokens, how they were found). `trained_tokens`: what the run trains on, steps x global batch
    x seq_len. A data set of unknown size is assumed to be one pass of the run: split x trained / (1 - split) held
    out of it; a separate one ASSUMED_VAL_DATASET_SHARE of the trained tokens."""
    known = validation.dataset_tokens
    if validation.separate_dataset:
        if known is not None:
            return known, "the validation data set's tokens"
        tokens = round(ASSUMED_VAL_DATASET_SHARE * trained_tokens)
        return tokens, f"assumed: {100 * ASSUMED_VAL_DATASET_SHARE:.0f}% of the tokens the run trains"
    if known is not None:
        return round(validation.split * known), "split x the data set's tokens"
    tokens = round(validation.split / (1 - validation.split) * trained_tokens)
    return tokens, "assumed: the run makes one pass over the data set; split x its tokens"


@dataclass(frozen=True)
class RunTime:
    """A run's wall time: its steps and its evaluations of the held-out set (none without validation)."""

    steps: int
    step_s: float
    """One optimizer step, training only."""
    evaluation: EvaluationEstimate | None
    evaluations: int
    held_out_basis: str | None

    @property
    def evaluation_s(self) -> float:
        return self.evaluations * self.evaluation.evaluation_s if self.evaluation else 0.0

    @property
    def run_s(self) -> float:
        return self.steps * self.step_s + self.evaluation_s

    @property
    def step_with_evaluation_s(self) -> float:
        """A step with the evaluations spread over the run's steps."""
        return self.run_s / self.steps


def run_time(sizing: Sizing, validation: Validation, assumptions: Assumptions | None = None) -> RunTime | None:
    """How long the sized job runs for `validation.steps` steps with its evaluations; None when its speed is not
    estimated (fp32). `assumptions`: the ones `sizing` was made with."""
    speed = sizing.throughput
    if speed is None:
        return None
    if not (validation.split > 0 or validation.separate_dataset):
        return RunTime(validation.steps, speed.step_s, None, 0, None)
    job = sizing.job
    trained = validation.steps * job.grad_accum * sizing.gpus * job.tokens
    tokens, basis = held_out_tokens(validation, trained)
    evaluation = estimate_evaluation(job, sizing.instance, sizing.nodes, tokens, assumptions)
    return RunTime(validation.steps, speed.step_s, evaluation, validation.evaluations, basis)
