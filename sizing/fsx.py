"""The FSx for Lustre file system a job's checkpoints need: bytes per checkpoint, the capacity that holds them, what a
save and a load take at its throughput, and what it costs. Pure Python (no torch).

What the trainer writes (trainer/checkpoint/checkpointer.py): fp32 master weights and AdamW's two fp32 moments, 12 bytes
per trained parameter (trainer/base/checkpoint/space.py), whatever the compute dtype; under LoRA only the adapters are
trained and saved (the frozen base comes from --model again), so its checkpoints are a fraction of a percent of the
model's. A save writes the new checkpoint before it
deletes the oldest of the --keep-checkpoints kept, so the file system holds keep + 1 of them at that moment. The same
file system also holds the run's staged hub weights (trainer/stage.py) and its Hugging Face export.

FSx for Lustre facts (PERSISTENT_2 SSD, the deployment type infra/lustre.py creates):
- capacity: 1200 GiB, or a multiple of 2400 GiB (Amazon FSx API reference, CreateFileSystem StorageCapacity);
- throughput: capacity in TiB x the per-unit storage throughput, 125, 250, 500 or 1000 MB/s/TiB (API reference,
  LustreFileSystemConfiguration PerUnitStorageThroughput; FSx for Lustre user guide, "Managing provisioned
  throughput capacity"). That is the baseline; reads may burst above it on network credits (user guide,
  "Performance characteristics of SSD and HDD storage classes"), writes of checkpoints do not count on it;
- price per GB-month of capacity, us-east-1, by throughput tier (aws.amazon.com/fsx/lustre/pricing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from sizing.memory import adapter_parameters
from trainer.base.checkpoint.space import COPIES_PER_PARAMETER, MASTER_WEIGHT_BYTES
from trainer.base.flags.config import LORA_TARGETS, CheckpointConfig
from trainer.base.model.presets import ModelShape
from trainer.base.units import GIB

TIB_GIB = 1024
MB = 10**6  # FSx quotes throughput in MB/s (decimal)
FSX_THROUGHPUT_PER_TIB = (125, 250, 500, 1000)
FSX_SMALLEST_GIB = 1200
FSX_INCREMENT_GIB = 2400
DEFAULT_FSX_CAPACITY_GIB = FSX_SMALLEST_GIB
DEFAULT_FSX_THROUGHPUT_PER_TIB = 250
FSX_PRICE_PER_GB_MONTH = {125: 0.145, 250: 0.210, 500: 0.340, 1000: 0.600}
HOURS_PER_MONTH = 730  # AWS prices a month as 730 hours
# Hub checkpoints of Llama 2 are stored in 16-bit floats, as is the trainer's default export (--export-dtype bf16).
STAGED_WEIGHT_BYTES = 2
EXPORT_WEIGHT_BYTES = 2
ADAPTER_EXPORT_BYTES = 4  # a LoRA export's adapter is fp32, as trained (trainer/checkpoint/export.py export_adapter)
KEEP_CHECKPOINTS = CheckpointConfig.keep  # the trainer's default; the job does not change it
# The checkpoint timeout a job gets: this many times the predicted save or load, and never less than the trainer's
# default. The baseline throughput is a floor for a file system the job has to itself; the factor covers other
# writers (the export, staging) and a slower first write.
TIMEOUT_FACTOR = 3
MIN_TIMEOUT_MINUTES = CheckpointConfig.timeout_minutes
# The job saves in the background (its trainer flags carry --async-checkpoint, workloads/job_staging.py): training
# waits only when the next save is due before the last one is written.
JOB_SAVES_IN_BACKGROUND = True


def fsx_capacity_problem(capacity_gib: int) -> str | None:
    """None for a valid PERSISTENT_2 SSD capacity, else what is allowed (for the config's check)."""
    valid = capacity_gib == FSX_SMALLEST_GIB or (capacity_gib > 0 and capacity_gib % FSX_INCREMENT_GIB == 0)
    return None if valid else f"{FSX_SMALLEST_GIB} or a multiple of {FSX_INCREMENT_GIB}"


def fsx_capacity_for(needed_bytes: int) -> int:
    """The smallest valid capacity (GiB) that holds `needed_bytes`."""
    needed_gib = math.ceil(needed_bytes / GIB)
    if needed_gib <= FSX_SMALLEST_GIB:
        return FSX_SMALLEST_GIB
    return math.ceil(needed_gib / FSX_INCREMENT_GIB) * FSX_INCREMENT_GIB


def fsx_throughput_bytes_per_s(capacity_gib: int, per_tib: int) -> float:
    return capacity_gib / TIB_GIB * per_tib * MB


def fsx_cost_per_hour(capacity_gib: int, per_tib: int) -> float:
    return capacity_gib * FSX_PRICE_PER_GB_MONTH[per_tib] / HOURS_PER_MONTH


@dataclass(frozen=True)
class StorageEstimate:
    """A job's checkpoints on an FSx for Lustre file system of `capacity_gib` at `per_tib` MB/s/TiB."""

    checkpoint_bytes: int
    keep: int
    staged_bytes: int
    """Hub weights staged on the volume before the workers start (0 for a randomly initialised preset)."""
    export_bytes: int
    capacity_gib: int
    per_tib: int

    @property
    def needed_bytes(self) -> int:
        """keep + 1 checkpoints (a save writes before it prunes), the staged weights and the export."""
        return (self.keep + 1) * self.checkpoint_bytes + self.staged_bytes + self.export_bytes

    @property
    def needed_capacity_gib(self) -> int:
        return fsx_capacity_for(self.needed_bytes)

    @property
    def fits(self) -> bool:
        return self.needed_bytes <= self.capacity_gib * GIB

    @property
    def throughput_bytes_per_s(self) -> float:
        return fsx_throughput_bytes_per_s(self.capacity_gib, self.per_tib)

    @property
    def save_s(self) -> float:
        """Writing one checkpoint at the file system's baseline throughput (every rank writes its shard at once)."""
        return self.checkpoint_bytes / self.throughput_bytes_per_s

    @property
    def load_s(self) -> float:
        """Reading it back at start: once, however many replica groups the mesh has (trainer/checkpoint/load.py)."""
        return self.checkpoint_bytes / self.throughput_bytes_per_s

    @property
    def cost_per_hour(self) -> float:
        return fsx_cost_per_hour(self.capacity_gib, self.per_tib)

    def wait_per_save_s(self, interval_s: float, async_save: bool = JOB_SAVES_IN_BACKGROUND) -> float:
        """Training time one save costs when saves start every `interval_s` seconds of training: all of a synchronous
        save; for a background save, the wait for the one still being written when the next is due (the trainer
        keeps at most one in flight, trainer/checkpoint/checkpointer.py). The copy of each GPU's shard to host memory
        that starts a background save (checkpoint bytes / GPUs, a few GiB at PCIe rates) is not counted."""
        if not async_save:
            return self.save_s
        return max(0.0, self.save_s - interval_s)

    def seconds_per_hour(
        self, step_s: float | None, every: int, async_save: bool = JOB_SAVES_IN_BACKGROUND
    ) -> float | None:
        """Seconds of every hour that training waits for checkpoints when it saves every `every` steps of `step_s`."""
        if not step_s or every < 1:
            return None
        interval_s = every * step_s
        wait_s = self.wait_per_save_s(interval_s, async_save)
        return 3600 * wait_s / (interval_s + wait_s)

    def steps_per_save(self, step_s: float) -> int:
        """The fewest steps between background saves for which no save waits for the one before."""
        return math.ceil(self.save_s / step_s)

    def timeout_minutes(self) -> int:
        """The trainer's --checkpoint-timeout-minutes for this job."""
        longest = max(self.save_s, self.load_s)
        return max(int(MIN_TIMEOUT_MINUTES), math.ceil(TIMEOUT_FACTOR * longest / 60))


def checkpoint_bytes(shape: ModelShape, lora_rank: int = 0, lora_targets: tuple[str, ...] = LORA_TARGETS) -> int:
    trained = adapter_parameters(shape, lora_rank, lora_targets) if lora_rank else shape.num_parameters
    return trained * MASTER_WEIGHT_BYTES * COPIES_PER_PARAMETER


def estimate_storage(
    shape: ModelShape,
    *,
    pretrained: bool,
    capacity_gib: int = DEFAULT_FSX_CAPACITY_GIB,
    per_tib: int = DEFAULT_FSX_THROUGHPUT_PER_TIB,
    keep: int = KEEP_CHECKPOINTS,
    lora_rank: int = 0,
    lora_targets: tuple[str, ...] = LORA_TARGETS,
) -> StorageEstimate:
    """Under LoRA the export holds the merged model and the adapter (trainer/checkpoint/export.py)."""
    trained_adapters = adapter_parameters(shape, lora_rank, lora_targets)
    return StorageEstimate(
        checkpoint_bytes=checkpoint_bytes(shape, lora_rank, lora_targets),
        keep=keep,
        staged_bytes=shape.num_parameters * STAGED_WEIGHT_BYTES if pretrained else 0,
        export_bytes=shape.num_parameters * EXPORT_WEIGHT_BYTES + ADAPTER_EXPORT_BYTES * trained_adapters,
        capacity_gib=capacity_gib,
        per_tib=per_tib,
    )


def storage_problem(estimate: StorageEstimate, model: str) -> str | None:
    """The config problem of a file system too small for the job's checkpoints, naming both sizes; None if it fits."""
    if estimate.fits:
        return None
    gib = estimate.checkpoint_bytes / GIB
    extra = (f"{estimate.staged_bytes / GIB:.1f} GiB of staged hub weights and " if estimate.staged_bytes else "") + (
        f"{estimate.export_bytes / GIB:.1f} GiB for the export"
    )
    better = replace(estimate, capacity_gib=estimate.needed_capacity_gib)
    return (
        f"fsdp-eks:storage.fsxCapacityGiB: {estimate.capacity_gib} is too small for {model}'s checkpoints: one is "
        f"{gib:.1f} GiB (fp32 weights and AdamW's two moments), and a save writes the next before it deletes the "
        f"oldest of the {estimate.keep} kept, so {estimate.keep + 1} x {gib:.1f} GiB = "
        f"{(estimate.keep + 1) * gib:.1f} GiB, plus {extra}: "
        f"{estimate.needed_bytes / GIB:.1f} GiB needed; expected {estimate.needed_capacity_gib} or more "
        f"(at {estimate.per_tib} MB/s/TiB a save then takes {better.save_s / 60:.1f} min, "
        f"${better.cost_per_hour:.2f}/h)"
    )


def storage_summary(estimate: StorageEstimate, step_s: float | None, every: int) -> dict[str, float | int | None]:
    """The storage figures of a stack output and of the sizing JSON."""
    per_hour = estimate.seconds_per_hour(step_s, every)
    return {
        "checkpointGiB": round(estimate.checkpoint_bytes / GIB, 1),
        "keepCheckpoints": estimate.keep,
        "storageNeededGiB": round(estimate.needed_bytes / GIB, 1),
        "fsxCapacityNeededGiB": estimate.needed_capacity_gib,
        "fsxCapacityGiB": estimate.capacity_gib,
        "fsxThroughputMBps": round(estimate.throughput_bytes_per_s / MB),
        "checkpointSaveMinutes": round(estimate.save_s / 60, 1),
        "checkpointLoadMinutes": round(estimate.load_s / 60, 1),
        "checkpointWaitSecondsPerHour": None if per_hour is None else round(per_hour),
        "checkpointTimeoutMinutes": estimate.timeout_minutes(),
        "fsxCostPerHour": round(estimate.cost_per_hour, 2),
    }


def checkpoint_wait_warning(estimate: StorageEstimate, step_s: float, every: int) -> str | None:
    """A warning for a job whose saves come faster than the file system writes them (training then waits for each
    save in turn), naming the interval, the save time, the time lost per hour and the settings that remove the wait;
    None when no save waits."""
    lost_s = estimate.seconds_per_hour(step_s, every)
    if not lost_s:
        return None
    faster = [
        per_tib
        for per_tib in FSX_THROUGHPUT_PER_TIB
        if per_tib > estimate.per_tib and replace(estimate, per_tib=per_tib).save_s <= every * step_s
    ]
    fixes = [f"fsdp-eks:job.checkpointEvery: {estimate.steps_per_save(step_s)} or more"]
    if faster:
        fixes.append(f"fsdp-eks:storage.fsxThroughputPerTiB: {faster[0]}")
    return (
        f"checkpoints every {every} steps of {step_s:.2f} s ({every * step_s:.0f} s) come faster than the file "
        f"system writes one ({estimate.checkpoint_bytes / GIB:.1f} GiB in {estimate.save_s:.0f} s at "
        f"{estimate.per_tib} MB/s/TiB on {estimate.capacity_gib} GiB): training waits {lost_s / 60:.1f} min of every "
        f"hour for saves; {' or '.join(fixes)} removes the wait"
    )
