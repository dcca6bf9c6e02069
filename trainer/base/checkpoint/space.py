"""Will the next checkpoint fit on its file system? Decided before a save (and at start), never found out by ENOSPC.

A save writes the new checkpoint next to the ones kept and prunes only after the commit, so at that moment the file
system holds --keep-checkpoints + 1 of them. When that does not fit but deleting, before the save, the checkpoints the
save would delete anyway does, those go first (the newest keep - 1 stay, so a crash during the save still leaves a
complete one). Otherwise the run stops with the numbers: what a checkpoint needs, what is free, what keep needs.
Torch-free: the figures are plain byte counts, the decision a pure function (tests/trainer/test_checkpoint_space.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from trainer.base.faults import fake_disk_bytes

# AdamW (trainer/optim.py) keeps two moments per parameter, each shaped like it and in its dtype (torch.optim.AdamW:
# exp_avg, exp_avg_sq), and the master weights are fp32 (trainer/model/build.py): a checkpoint is the fp32 parameters
# three times over, 12 bytes per parameter (plus a step counter per parameter tensor). sizing/fsx.py uses it.
COPIES_PER_PARAMETER = 3
MASTER_WEIGHT_BYTES = 4
# What DCP stores per item beyond its data: torch.save's framing in the .distcp file and the item's entry in
# .metadata. Measured on the tiny preset's checkpoint (121 items): 1.5 KiB of framing and 0.3 KiB of metadata each.
ITEM_OVERHEAD_BYTES = 2048


def format_bytes(count: float) -> str:
    """1536 -> '1.5 KiB': binary units, as df -h and the FSx console report capacity."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(count) < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def directory_bytes(path: Path) -> int:
    """Bytes a directory tree occupies on disk (allocated blocks, like du): what deleting it gives back."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                continue
    return total


def free_bytes(directory: Path) -> int:
    """Bytes this process may still write under `directory` (statvfs f_bavail: what non-root users get).

    Tests simulate a small file system with TRAINER_FAKE_DISK_BYTES (trainer/base/faults.py): the disk is that large and
    the checkpoint directory's own contents are what uses it, so pruning frees space as it would on a real one.
    """
    fake = fake_disk_bytes()
    if fake is not None:
        return max(0, fake - directory_bytes(directory))
    stats = os.statvfs(directory)
    return stats.f_bavail * stats.f_frsize


@dataclass(frozen=True)
class Existing:
    """A checkpoint directory on disk: complete (step_<N>) or left by a crashed save (step_<N>.tmp)."""

    path: Path
    bytes: int
    complete: bool
    step: int = 0


@dataclass(frozen=True)
class SpacePlan:
    needed: int
    """Bytes the next checkpoint needs."""
    free: int
    prune_first: list[Path] = field(default_factory=list)
    """Deleted before the save: stale partial saves, and complete checkpoints the save would prune after it."""
    fits: bool = True
    keep: int = 1
    checkpoint: int = 0
    """Bytes of one checkpoint (the newest complete one on disk, else the estimate)."""

    def problem(self, directory: Path, step: int) -> str:
        """Why the save of `step` cannot happen, naming every number a user needs to fix it."""
        return (
            f"--checkpoint-dir {directory}: the checkpoint of step {step} needs {format_bytes(self.needed)} but only "
            f"{format_bytes(self.free)} is free, even after deleting what a save would delete anyway (keeping the "
            f"newest {self.keep - 1} complete, so a crash during the save leaves one). --keep-checkpoints {self.keep} "
            f"of {format_bytes(self.checkpoint)} each needs {format_bytes((self.keep + 1) * self.checkpoint)} while "
            f"a save is written ({self.keep} kept + the new one): a larger file system (fsdp-eks:storage."
            f"fsxCapacityGiB) or fewer --keep-checkpoints"
        )


def plan_space(needed: int, free: int, existing: list[Existing], keep: int) -> SpacePlan:
    """Whether a checkpoint of `needed` bytes fits in `free` bytes, deleting first what the save would delete anyway.

    After a save the newest `keep` complete checkpoints remain, the new one included: of the complete ones on disk,
    all but the newest keep - 1 go. Partial saves (.tmp) are never read and go too. The newest complete checkpoint
    is never deleted before the save, whatever `keep`: a crash during the save must leave one to resume from.
    """
    complete = sorted((e for e in existing if e.complete), key=lambda e: e.step)
    checkpoint = complete[-1].bytes if complete else needed
    needed = max(needed, checkpoint)  # the same model's last checkpoint, measured on disk, if that is larger
    stale = [e for e in existing if not e.complete]
    survivors = max(1, keep - 1)
    doomed = [*stale, *complete[:-survivors]]
    if needed <= free:
        return SpacePlan(needed, free, [], True, keep, checkpoint)
    if needed <= free + sum(e.bytes for e in doomed):
        return SpacePlan(needed, free, [e.path for e in doomed], True, keep, checkpoint)
    return SpacePlan(needed, free + sum(e.bytes for e in doomed), [], False, keep, checkpoint)
