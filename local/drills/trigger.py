"""When a drill fires: after the first complete checkpoint, or once the leader has logged a given step."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trainer.checkpoint.layout import complete_checkpoints


@dataclass(frozen=True)
class Trigger:
    after_step: int | None = None  # None: after the first complete checkpoint

    def describe(self) -> str:
        return "after the first checkpoint" if self.after_step is None else f"once step {self.after_step} is logged"

    def met(self, checkpoint_dir: Path | None, last_step: int, durable: Callable[[], int | None] | None = None) -> bool:
        """`durable`: the newest complete checkpoint in S3, for a drill that waits for one there instead."""
        if self.after_step is not None:
            return last_step >= self.after_step
        if durable is not None:
            return durable() is not None
        return checkpoint_dir is not None and bool(complete_checkpoints(checkpoint_dir))
