"""Distributed checkpoints (torch.distributed.checkpoint): saved atomically, restored at any world size.

A checkpoint holds the model and optimizer (as sharded DTensors, so DCP reshards them for a different world
size or strategy on load), the LR scheduler, the fp16 loss scale, the data position (samples consumed), the RNG
state and the step.
Layout and the commit protocol are in trainer/checkpoint/layout.py: every rank writes into step_<N>.tmp; once every
rank has written, rank 0 writes meta.json and renames the directory, so a crash at any moment leaves only complete
checkpoints under their final names. Before a save, trainer/checkpoint/space.py decides whether it fits.

Saves are synchronous, or with --async-checkpoint written in the background: the step waits while the state is
copied to host memory (DCP's DefaultStager; pinned on CUDA), a thread writes it, and rank 0 commits it in that thread
the moment the save completes, whatever its main thread is doing (trainer/checkpoint/commit.py). DCP's coordinator
(rank 0) completes a save only after gathering every rank's write result (state_dict_saver: the "write" all_reduce
before finish), so rank 0's save finishing means every shard is on disk. At most one save is in flight: the next one,
and the end of training, wait for it. All checkpoint collectives use the long-timeout gloo group
(trainer/parallel/distributed.py `io_group`).
"""

from __future__ import annotations

import logging
import math
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
from torch.distributed.tensor import DTensor, Shard

from trainer.checkpoint.commit import Commits, Outcome, PendingSave
from trainer.checkpoint.layout import (
    TMP_SUFFIX,
    checkpoint_name,
    complete_checkpoints,
    read_meta,
    write_meta,
)
from trainer.checkpoint.load import Replicas, load_state
from trainer.checkpoint.space import (
    COPIES_PER_PARAMETER,
    ITEM_OVERHEAD_BYTES,
    Existing,
    SpacePlan,
    directory_bytes,
    format_bytes,
    free_bytes,
    plan_space,
)
from trainer.config import CheckpointConfig
from trainer.env import DistEnv
from trainer.errors import StorageError
from trainer.faults import maybe_fault
from trainer.loss_scale import LossScaler

log = logging.getLogger(__name__)


@dataclass
class Progress:
    step: int = 0
    """Optimizer steps completed."""
    consumed_samples: int = 0
    """Position in the sample order (trainer/data/packing.py): the next step's global batch starts here."""


@dataclass
class TrainState:
    """Everything that changes as training proceeds: exactly what a checkpoint saves and restores."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any
    loss_scaler: LossScaler
    progress: Progress


@dataclass
class CheckpointStats:
    """The latest save and the load at start, for the metrics (None until there is one)."""

    save_s: float | None = None
    """Wall time of the last committed save, from its start to its commit (asynchronous: mostly in the background)."""
    blocked_s: float | None = None
    """Time the last save kept training waiting (synchronous: all of it; asynchronous: the copy to host memory)."""
    bytes: int | None = None
    """Bytes of the last checkpoint (all ranks together), as `checkpoint_bytes` counts them."""
    load_s: float | None = None
    read_bytes: int | None = None
    """Bytes the load at start read from the checkpoint files, all ranks together."""


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


def _items(tensor: torch.Tensor) -> int:
    """Stored items of a tensor: one per shard for a DTensor (each rank writes its own), else one."""
    if isinstance(tensor, DTensor):
        return math.prod(
            tensor.device_mesh.size(dim) for dim, p in enumerate(tensor.placements) if isinstance(p, Shard)
        )
    return 1


def checkpoint_bytes(tree: Any) -> int:
    """Bytes a (nested) state dict takes as a DCP checkpoint: its tensors at their global size, each once (DCP
    deduplicates replicas), plus ITEM_OVERHEAD_BYTES per stored item."""
    if isinstance(tree, dict):
        return sum(checkpoint_bytes(value) for value in tree.values())
    if isinstance(tree, list | tuple):
        return sum(checkpoint_bytes(value) for value in tree)
    if isinstance(tree, torch.Tensor):
        return tree.numel() * tree.element_size() + _items(tree) * ITEM_OVERHEAD_BYTES  # DTensor: global numel
    return ITEM_OVERHEAD_BYTES


def expected_checkpoint_bytes(model: nn.Module) -> int:
    """A checkpoint's bytes before the optimizer has any state (its moments appear at the first step): each
    parameter, its two moments, and the step counter."""
    total = 0
    for parameter in model.parameters():
        one = parameter.numel() * parameter.element_size() + _items(parameter) * ITEM_OVERHEAD_BYTES
        total += COPIES_PER_PARAMETER * one + ITEM_OVERHEAD_BYTES
    return total


class Checkpointer:
    def __init__(
        self,
        config: CheckpointConfig,
        env: DistEnv,
        device_type: str,
        meta: dict[str, Any],
        io: dist.ProcessGroup,
        replicas: Replicas | None = None,
    ) -> None:
        assert config.directory is not None
        self.directory = Path(config.directory)
        self.config = config
        self.env = env
        self.device_type = device_type
        self.meta = meta
        """Facts about the run written into each meta.json (model fingerprint, data settings)."""
        self.io = io
        self.replicas = replicas
        self.stats = CheckpointStats()
        self._pending: PendingSave | None = None
        """The save in flight: resolved by `commits`, in the main thread or in DCP's writer thread."""
        self.commits = Commits(self._commit, env.is_leader)
        self._stager: Any = None

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

    # -- space --------------------------------------------------------------------------------------------------

    def _space_plan(self, needed: int) -> SpacePlan:
        """Rank 0 reads the (shared) file system and decides; every rank gets the same plan."""
        plan: list[SpacePlan | None] = [None]
        if self.env.is_leader:
            self.directory.mkdir(parents=True, exist_ok=True)
            existing = [Existing(p, directory_bytes(p), True, s) for s, p in complete_checkpoints(self.directory)]
            existing += [Existing(p, directory_bytes(p), False) for p in self.directory.glob(f"step_*{TMP_SUFFIX}")]
            plan[0] = plan_space(needed, free_bytes(self.directory), existing, self.config.keep)
        dist.broadcast_object_list(plan, group=self.io, group_src=0)
        assert plan[0] is not None
        return plan[0]

    def check_space(self, state: TrainState) -> None:
        """At start: will the next save fit? A run that cannot save fails now, not after hours of training."""
        plan = self._space_plan(expected_checkpoint_bytes(state.model))
        if not plan.fits:
            raise StorageError(plan.problem(self.directory, state.progress.step + 1))
        log.info(
            "checkpoints: %s each (estimated), %s free in %s",
            format_bytes(plan.needed),
            format_bytes(plan.free),
            self.directory,
        )

    def _make_room(self, needed: int, step: int) -> None:
        plan = self._space_plan(needed)
        if not plan.fits:
            raise StorageError(plan.problem(self.directory, step))
        if plan.prune_first and self.env.is_leader:
            with self.commits.locked():
                for path in plan.prune_first:
                    shutil.rmtree(path, ignore_errors=True)
            names = ", ".join(p.name for p in plan.prune_first)
            log.warning("deleted %s before saving step %d: the save needs %s", names, step, format_bytes(plan.needed))

    # -- save and commit ----------------------------------------------------------------------------------------

    def save(self, state: TrainState) -> None:
        self.finish()  # at most one save in flight: the previous one is committed (and pruned) first
        started, progress = time.perf_counter(), state.progress
        final = self.directory / checkpoint_name(progress.step)
        tmp = final.with_name(final.name + TMP_SUFFIX)
        saved = self._state(state)
        size = checkpoint_bytes(saved)
        self._make_room(size, progress.step)
        if self.env.is_leader:
            shutil.rmtree(tmp, ignore_errors=True)  # left by a crashed save of the same step
            tmp.mkdir(parents=True)
        dist.barrier(group=self.io)
        maybe_fault("sigterm_starting_save", progress.step)
        writer = dcp.FileSystemWriter(str(tmp), thread_count=self.config.threads)
        pending = PendingSave(progress.step, progress.consumed_samples, tmp, final, started, size, None)
        if self.config.async_save:
            # A Future: async_save returns an AsyncSaveResponse only from asynchronous staging, which the stager
            # (below) turns off.
            pending.future = dcp.async_save(  # pyright: ignore[reportAttributeAccessIssue]
                saved, storage_writer=writer, process_group=self.io, async_stager=self.stager
            )
        else:
            dcp.save(saved, storage_writer=writer, process_group=self.io)
        self._track(pending)
        self.stats.blocked_s = time.perf_counter() - started
        maybe_fault("sigterm_during_save", progress.step)
        maybe_fault("sigterm_agent_during_save", progress.step)
        if not self.config.async_save:
            self.finish()

    @property
    def stager(self) -> Any:
        """One stager for the run: it keeps its host buffers (pinned on CUDA) from one save to the next."""
        if self._stager is None:
            from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

            cuda = self.device_type == "cuda"
            options = StagingOptions(
                use_pinned_memory=cuda, use_shared_memory=False, use_async_staging=False, use_non_blocking_copy=False
            )
            self._stager = DefaultStager(options)
        return self._stager

    def _track(self, pending: PendingSave) -> None:
        """The save in flight from now on: committed when it completes (rank 0), by whichever thread sees it first."""
        self._pending = pending
        self.commits.track(pending)

    def poll(self) -> None:
        """Between steps: take a background save whose write has finished, committed if the save's own thread has
        not yet done so (rank 0; no collective); a failed write raises here, on the rank whose write failed."""
        pending = self._pending
        if pending is None or not pending.done():
            return
        self._pending = None  # taken: a SIGTERM from here on has nothing left to settle
        self.commits.resolve(pending)
        pending.raise_failure()

    def finish(self) -> None:
        """Wait for the save in flight, if any, and see it committed; every rank calls this at the same points
        (before a save, at the end of training)."""
        pending = self._pending
        if pending is not None:
            pending.wait()
            maybe_fault("kill_during_save", pending.step)
            self._pending = None
            self.commits.resolve(pending)
            pending.raise_failure()
        # Always, also where rank 0 has committed already and others have not yet seen their write finish.
        dist.barrier(group=self.io)

    def settle(self, wait_s: float) -> bool:
        """On SIGTERM (trainer/shutdown.py): see the save whose shards are written, or will be within `wait_s`,
        committed; else abandon it (its .tmp directory is never read). No collective: peers may already be gone.
        False when a save was abandoned or failed."""
        pending, self._pending = self._pending, None
        if pending is None:
            return True
        pending.wait(wait_s)
        outcome = self.commits.resolve(pending, abandon=True)
        if outcome is not Outcome.COMMITTED:
            why = type(pending.error).__name__ if pending.error else f"still writing after {wait_s:g}s"
            log.warning("abandoned the save of step %d: %s", pending.step, why)
        return outcome is Outcome.COMMITTED

    def _commit(self, pending: PendingSave) -> None:
        """Rank 0, under Commits' lock, in the main thread or DCP's writer thread: meta.json, then the rename that
        makes the checkpoint complete, then pruning."""
        # Also here: a background save is committed in DCP's writer thread, often before finish() reaches its own.
        maybe_fault("kill_during_save", pending.step)
        meta = {**self.meta, "step": pending.step, "consumed_samples": pending.consumed_samples}
        write_meta(pending.tmp, {**meta, "world_size": self.env.world_size, "device_type": self.device_type})
        if pending.final.exists():
            shutil.rmtree(pending.final)  # an older run's checkpoint of the same step, superseded
        os.rename(pending.tmp, pending.final)
        _fsync_directory(self.directory)
        self._prune()
        self.stats.save_s = time.perf_counter() - pending.started
        self.stats.bytes = pending.bytes
        log.info("saved checkpoint %s (%s) in %.2fs", pending.final, format_bytes(pending.bytes), self.stats.save_s)

    def _prune(self) -> None:
        for _, path in complete_checkpoints(self.directory)[: -self.config.keep]:
            shutil.rmtree(path)
        for stale in self.directory.glob(f"step_*{TMP_SUFFIX}"):
            shutil.rmtree(stale, ignore_errors=True)

    def close(self) -> None:
        if self._stager is not None:
            self._stager.close()
            self._stager = None

    # -- restore ------------------------------------------------------------------------------------------------

    def restore(self, state: TrainState) -> None:
        """Load the newest complete checkpoint, if any, into `state` (in place)."""
        checkpoints = complete_checkpoints(self.directory)
        if not checkpoints:
            return
        started = time.perf_counter()
        step, path = checkpoints[-1]
        meta = read_meta(path)
        saved = self._state(state)
        if meta.get("device_type") != self.device_type:
            del saved["rng"]  # a CUDA generator state means nothing on CPU and vice versa
        read_bytes = load_state(saved, path, self.io, self.replicas)
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
        self.stats.load_s, self.stats.read_bytes = time.perf_counter() - started, read_bytes
        log.info(
            "resumed from %s (saved by %d ranks, now %d) in %.2fs, %s read",
            path,
            meta.get("world_size"),
            self.env.world_size,
            self.stats.load_s,
            format_bytes(read_bytes),
        )


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable (POSIX: a rename is persisted by syncing the parent directory)."""
    handle = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
