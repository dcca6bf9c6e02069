"""Distributed checkpoints (torch.distributed.checkpoint): saved atomically, restored at any world size.

A checkpoint holds the model and optimizer (as sharded DTensors, so DCP reshards them for a different world
size or strategy on load), the LR scheduler, the fp16 loss scale, the data position (samples consumed), the RNG
state and the step.
Layout and the commit protocol are in trainer/checkpoint_layout.py: every rank writes into step_<N>.tmp; after
a barrier rank 0 writes meta.json and renames the directory, so a crash at any moment leaves only complete
checkpoints under their final names.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from trainer.checkpoint_layout import TMP_SUFFIX, checkpoint_name, complete_checkpoints, read_meta, write_meta
from trainer.env import DistEnv
from trainer.faults import maybe_fault
from trainer.loss_scale import LossScaler

log = logging.getLogger(__name__)


@dataclass
class Progress:
    step: int = 0
    """Optimizer steps completed."""
    consumed_samples: int = 0
    """Position in the sample order (trainer/data.py): the next step's global batch starts here."""


@dataclass
class TrainState:
    """Everything that changes as training proceeds: exactly what a checkpoint saves and restores."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any
    loss_scaler: LossScaler
    progress: Progress


def _rng_state(device_type: str) -> dict[str, torch.Tensor]:
    # Every rank is seeded alike and draws alike, so one copy (DCP keeps rank 0's) restores all ranks.
    state = {"cpu": torch.get_rng_state()}
    if device_type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def _set_rng_state(state: dict[str, torch.Tensor]) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"])


class Checkpointer:
    def __init__(self, directory: str, keep: int, env: DistEnv, device_type: str, meta: dict[str, Any]) -> None:
        self.directory = Path(directory)
        self.keep = keep
        self.env = env
        self.device_type = device_type
        self.meta = meta
        """Facts about the run written into each meta.json (model fingerprint, data settings)."""

    def _state(self, state: TrainState) -> dict[str, Any]:
        # get_state_dict initialises empty optimizer state, so a fresh optimizer is a complete load template.
        model_state, optim_state = get_state_dict(state.model, state.optimizer)
        return {
            "model": model_state,
            "optim": optim_state,
            "scheduler": state.scheduler.state_dict(),
            "loss_scale": state.loss_scaler.state_dict(),
            "progress": {
                "step": torch.tensor(state.progress.step, dtype=torch.int64),
                "consumed_samples": torch.tensor(state.progress.consumed_samples, dtype=torch.int64),
            },
            "rng": _rng_state(self.device_type),
        }

    def save(self, state: TrainState) -> Path:
        started, progress = time.perf_counter(), state.progress
        final = self.directory / checkpoint_name(progress.step)
        tmp = final.with_name(final.name + TMP_SUFFIX)
        if self.env.is_leader:
            shutil.rmtree(tmp, ignore_errors=True)  # left by a crashed save of the same step
            tmp.mkdir(parents=True)
        dist.barrier()
        dcp.save(self._state(state), checkpoint_id=str(tmp))
        maybe_fault("kill_during_save", progress.step)
        dist.barrier()  # every rank's shards are on disk before the commit
        if self.env.is_leader:
            meta = {**self.meta, "step": progress.step, "consumed_samples": progress.consumed_samples}
            write_meta(tmp, {**meta, "world_size": self.env.world_size, "device_type": self.device_type})
            if final.exists():
                shutil.rmtree(final)  # an older run's checkpoint of the same step, superseded
            os.rename(tmp, final)
            _fsync_directory(self.directory)
            self._prune()
            log.info("saved checkpoint %s in %.2fs", final, time.perf_counter() - started)
        dist.barrier()
        return final

    def _prune(self) -> None:
        for _, path in complete_checkpoints(self.directory)[: -self.keep]:
            shutil.rmtree(path)
        for stale in self.directory.glob(f"step_*{TMP_SUFFIX}"):
            shutil.rmtree(stale, ignore_errors=True)

    def restore(self, state: TrainState) -> None:
        """Load the newest complete checkpoint, if any, into `state` (in place)."""
        checkpoints = complete_checkpoints(self.directory)
        if not checkpoints:
            return
        step, path = checkpoints[-1]
        meta = read_meta(path)
        saved = self._state(state)
        if meta.get("device_type") != self.device_type:
            del saved["rng"]  # a CUDA generator state means nothing on CPU and vice versa
        dcp.load(saved, checkpoint_id=str(path))
        set_state_dict(state.model, state.optimizer, model_state_dict=saved["model"], optim_state_dict=saved["optim"])
        state.scheduler.load_state_dict(saved["scheduler"])
        state.loss_scaler.load_state_dict(saved["loss_scale"])
        if "rng" in saved:
            _set_rng_state(saved["rng"])
        state.progress = Progress(int(saved["progress"]["step"]), int(saved["progress"]["consumed_samples"]))
        if state.progress.step != step:
            raise RuntimeError(f"{path}: holds step {state.progress.step}, expected {step}")
        for key in ("seq_len", "dataset", "seed"):
            if meta.get(key) != self.meta.get(key):
                log.warning(
                    "resuming with %s %s (checkpoint had %s): data order differs",
                    key,
                    self.meta.get(key),
                    meta.get(key),
                )
        log.info("resumed from %s (saved by %d ranks, now %d)", path, meta.get("world_size"), self.env.world_size)


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable (POSIX: a rename is persisted by syncing the parent directory)."""
    handle = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
