"""Distributed checkpoints (torch.distributed.checkpoint): saved atomically, restored at any world size.

A checkpoint holds the model and optimizer (as sharded DTensors, so DCP reshards them for a different world
size or strategy on load), the LR scheduler, the fp16 loss scale, the data position (samples consumed), the RNG
state and the step.
Layout and the commit protocol are in trainer/checkpoint/layout.py: every rank writes into step_<N>.tmp; once every
rank has written, rank 0 writes meta.json and renames the directory, so a crash at any moment leaves only complete
checkpoints under their final names. Before a save, trainer/base/checkpoint/space.py decides whether it fits.

Saves are synchronous, or with --async-checkpoint written in the background: the step waits while the state is
copied to host memory (DCP's DefaultStager; pinned on CUDA), a thread writes it, and rank 0 commits it in that thread
the moment the save completes, whatever its main thread is doing (trainer/checkpoint/commit.py). DCP's coordinator
(rank 0) completes a save only after gathering every rank's write result (state_dict_saver: the "write" all_reduce
before finish), so rank 0's save finishing means every shard is on disk. At most one save is in flight: the next one,
and the end of training, wait for it. All checkpoint collectives use the long-timeout gloo group
(trainer/comms/distributed.py `io_group`).

On a replicated mesh (HYBRID_SHARD, NO_SHARD) every replica holds the same state, and each rank stages and writes only
its share of it (writer_share, split by trainer/base/checkpoint/writers.py): one copy over all ranks, so a node pins
about 1/replicas of its replica's state, where each node used to pin all of it for DCP to write a part.

With --artifacts-uri, checkpoints also go to S3, the durable tier (trainer/checkpoint/durable.py): the same state dict,
written after the fast tier's write as part of the same save. At start the run resumes from the newest complete
checkpoint in --checkpoint-dir; without one, from the newest complete one of its own durable tier (a stack destroyed
and brought up again with the same bucket carries on), else from --resume-from.
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
from torch.distributed.checkpoint.staging import AsyncStager
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_state_dict,
    set_model_state_dict,
    set_state_dict,
)
from torch.distributed.tensor import DTensor, Shard

from trainer.base.checkpoint.space import (
    COPIES_PER_PARAMETER,
    ITEM_OVERHEAD_BYTES,
    Existing,
    SpacePlan,
    directory_bytes,
    format_bytes,
    free_bytes,
    plan_space,
)
from trainer.base.checkpoint.writers import assign_replicas, replicas_of
from trainer.base.errors import InputError, StorageError
from trainer.base.faults import maybe_fault
from trainer.base.flags.config import ArtifactsConfig, CheckpointConfig
from trainer.base.pod.env import DistEnv
from trainer.base.s3.uri import S3Uri
from trainer.checkpoint.commit import Commits, Outcome, PendingSave
from trainer.checkpoint.durable import DurableSaveError, DurableTier, Upload, describe
from trainer.checkpoint.layout import (
    META_FILE,
    TMP_SUFFIX,
    checkpoint_name,
    commit_directory,
    complete_checkpoints,
    fingerprint_difference,
    leftover_directories,
    lora_difference,
    read_meta,
    write_meta,
)
from trainer.checkpoint.load import Replicas, Source, load_state
from trainer.checkpoint.s3_store import S3Checkpoints, resume_source
from trainer.checkpoint.stats import CheckpointStats
from trainer.comms.distributed import replica_place
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


__all__ = ["CheckpointStats", "Checkpointer", "Progress", "TrainState"]

# Where a run's starting checkpoint was found, as its log line says.
FAST_TIER = "the fast tier (--checkpoint-dir)"
DURABLE_TIER = "this run's durable tier (--artifacts-uri)"
RESUME_FROM = "--resume-from"


@dataclass(frozen=True)
class ResumePoint:
    """The checkpoint a run starts from, and which tier it is in."""

    step: int
    source: Source
    meta: dict[str, Any]
    tier: str
    """Where it was found, for the log: the fast tier, this run's durable tier, or --resume-from."""


class _Staged(AsyncStager):
    """A state dict already copied to host memory (Checkpointer.stager): DCP's background write takes it as it is."""

    _synchronize_after_execute = False

    def stage(self, state_dict: Any) -> Any:
        return state_dict


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


def _state_dict_options_of(model: nn.Module) -> StateDictOptions:
    """_state_dict_options for a model alone."""
    frozen = any(not parameter.requires_grad for parameter in model.parameters())
    return StateDictOptions(ignore_frozen_params=frozen, strict=not frozen)


def _state_dict_options(state: TrainState) -> StateDictOptions:
    """A checkpoint holds what is trained: under LoRA the adapters (and their optimizer state), not the frozen base,
    which --model gives again on resume (torch/distributed/checkpoint/state_dict.py: ignore_frozen_params leaves out
    parameters without requires_grad). Loading then leaves the frozen parameters as they are (strict=False); every
    trained one is still loaded, or DCP's load fails on the key missing from the checkpoint."""
    return _state_dict_options_of(state.model)


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
    """A checkpoint's bytes before the optimizer has any state (its moments appear at the first step): each trained
    parameter (under LoRA the adapters alone), its two moments, and the step counter."""
    total = 0
    for parameter in (p for p in model.parameters() if p.requires_grad):
        one = parameter.numel() * parameter.element_size() + _items(parameter) * ITEM_OVERHEAD_BYTES
        total += COPIES_PER_PARAMETER * one + ITEM_OVERHEAD_BYTES
    return total


def _leaves(tree: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """(path, leaf) of a nested state dict; lists are leaves, as DCP takes them (param_groups)."""
    found: list[tuple[str, Any]] = []
    for key, value in tree.items():
        path = f"{prefix}/{key}" if prefix else str(key)
        found += _leaves(value, path) if isinstance(value, dict) else [(path, value)]
    return found


def _kept(tree: dict[str, Any], kept: set[str], prefix: str = "") -> dict[str, Any]:
    """The leaves of `tree` whose paths are in `kept`, nested as in `tree`; subtrees left empty are dropped."""
    chosen: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}/{key}" if prefix else str(key)
        if isinstance(value, dict):
            if inner := _kept(value, kept, path):
                chosen[key] = inner
        elif path in kept:
            chosen[key] = value
    return chosen


def writer_share(saved: dict[str, Any]) -> dict[str, Any]:
    """What this rank writes of a save, and so all it stages into host memory (trainer/base/checkpoint/writers.py): on a
    replicated mesh, each replicated DTensor's shard on the replica assign_replicas gives it (from every tensor's path
    and global bytes, alike on every rank), the small rest (step counters, scheduler, loss scale, progress, RNG,
    alike on every rank) on the first replica alone; on any other mesh, everything. DCP then has one holder per item
    and writes exactly these (its dedup, _dedup_save_plans.py, keeps the only holder)."""
    leaves = _leaves(saved)
    places = {path: replica_place(leaf) for path, leaf in leaves if isinstance(leaf, DTensor)}
    replicated = {path: place for path, place in places.items() if place.count > 1}
    if not replicated:
        return saved
    sizes = {path: leaf.numel() * leaf.element_size() for path, leaf in leaves if path in replicated}  # global
    owners = assign_replicas(sizes, replicas_of(place.count for place in replicated.values()))
    first = next(iter(replicated.values())).index == 0
    kept = {
        path
        for path, _ in leaves
        if (owners[path] == replicated[path].index if path in replicated else path in places or first)
    }
    return _kept(saved, kept)


class Checkpointer:
    def __init__(
        self,
        config: CheckpointConfig,
        env: DistEnv,
        device_type: str,
        meta: dict[str, Any],
        io: dist.ProcessGroup,
        replicas: Replicas | None = None,
        artifacts: ArtifactsConfig | None = None,
        last_step: int = 0,
    ) -> None:
        """`artifacts`: the durable tier on S3 (with its uri set) and --resume-from; `last_step`: the run's last
        step, whose checkpoint always goes to S3."""
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
        self.resume_from = artifacts.resume_from if artifacts else None
        self.durable = None
        if artifacts is not None and artifacts.uri:
            self.durable = DurableTier(artifacts, config.keep, config.threads, last_step, env.is_leader, io, self.stats)
        self._upload: Upload | None = None
        """The save in flight's write to S3: waited for by finish(), abandoned by settle()."""
        self.extra_meta: dict[str, Any] = {}
        """More facts for the next save's meta.json, as they stand at its step (the best evaluation so far)."""
        self.spared_step: int | None = None
        """A checkpoint that retention never deletes, in either tier (--keep-best's); the next save goes to S3 too
        when it is this step's."""
        self._at_save: dict[int, tuple[dict[str, Any], int | None]] = {}
        """extra_meta and spared_step as they were when each save in flight started: its commit, whenever it comes,
        writes and prunes by those."""
        self._committed_spared: int | None = None
        self.resumed_meta: dict[str, Any] | None = None
        """meta.json of the checkpoint the run resumed from (either tier), None for a fresh start."""
        self._resume_at: ResumePoint | None = None  # resume_point(), once looked for
        self._looked_for_resume_point = False

    def _state(self, state: TrainState) -> dict[str, Any]:
        # get_state_dict initialises empty optimizer state, so a fresh optimizer is a complete load template.
        model_state, optim_state = get_state_dict(state.model, state.optimizer, options=_state_dict_options(state))
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
            spared = {self.spared_step, self._committed_spared}  # never deleted to make room either
            existing = [
                Existing(p, directory_bytes(p), True, s)
                for s, p in complete_checkpoints(self.directory)
                if s not in spared
            ]
            existing += [Existing(p, directory_bytes(p), False) for p in leftover_directories(self.directory)]
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
        self._at_save = {progress.step: (dict(self.extra_meta), self.spared_step)}
        saved = self._state(state)
        size = checkpoint_bytes(saved)  # the whole checkpoint: every rank's share together
        saved = writer_share(saved)
        self._make_room(size, progress.step)
        if self.env.is_leader:
            shutil.rmtree(tmp, ignore_errors=True)  # left by a crashed save of the same step
            tmp.mkdir(parents=True)
        dist.barrier(group=self.io)
        maybe_fault("sigterm_starting_save", progress.step)
        writer = dcp.FileSystemWriter(str(tmp), thread_count=self.config.threads)
        pending = PendingSave(progress.step, progress.consumed_samples, tmp, final, started, size, None)
        wanted = self.durable and (self.durable.wanted(progress.step) or progress.step == self.spared_step)
        durable = self.durable if wanted else None
        meta = self._meta(progress.step, progress.consumed_samples)
        if self.config.async_save:
            # Staged here, once, for both tiers: the fast tier's background write and then the S3 write read the
            # same copy in host memory (the stager's buffers, reused only by the next save, after finish()).
            saved = self.stager.stage(saved)
            # A Future: async_save returns an AsyncSaveResponse only from asynchronous staging, which _Staged is not.
            pending.future = dcp.async_save(  # pyright: ignore[reportAttributeAccessIssue]
                saved, storage_writer=writer, process_group=self.io, async_stager=_Staged()
            )
            if durable:
                self._upload = durable.upload(
                    saved, progress.step, meta, size, after=pending.future, spared=self.spared_step
                )
        else:
            dcp.save(saved, storage_writer=writer, process_group=self.io)
        self._track(pending)
        self.stats.blocked_s = time.perf_counter() - started
        maybe_fault("sigterm_during_save", progress.step)
        maybe_fault("sigterm_agent_during_save", progress.step)
        if not self.config.async_save:
            self.finish()  # the fast tier's commit first: a failed S3 write leaves it intact
            if durable:
                self._upload = durable.upload(saved, progress.step, meta, size, after=None, spared=self.spared_step)
                self.finish()
                self.stats.blocked_s = time.perf_counter() - started

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
        """Wait for the save in flight, if any, and see it committed (in S3 too); every rank calls this at the same
        points (before a save, at the end of training). The last step's checkpoint missing on S3 fails every rank."""
        pending = self._pending
        if pending is not None:
            pending.wait()
            maybe_fault("kill_during_save", pending.step)
            self._pending = None
            self.commits.resolve(pending)
            pending.raise_failure()
        upload, self._upload = self._upload, None
        if upload is None:
            # Always, also where rank 0 has committed already and others have not yet seen their write finish.
            dist.barrier(group=self.io)
        else:
            self._finish_upload(upload)

    def _finish_upload(self, upload: Upload) -> None:
        """Every rank (each has its part of the same S3 save): wait for it, then, in place of finish()'s barrier,
        agree whether the last step's S3 write failed anywhere (its meta.json is rank 0's alone); if so, fail."""
        upload.wait()
        lost = upload.final and upload.error is not None
        flag = torch.tensor([int(lost)], dtype=torch.int64)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self.io)
        if int(flag[0]):
            why = describe(upload.error) if upload.error is not None else "its write failed on another rank"
            raise DurableSaveError(f"the last checkpoint was not saved to {upload.uri}: {why}")

    def settle(self, wait_s: float) -> bool:
        """On SIGTERM (trainer/base/pod/shutdown.py): see the save whose shards are written, or will be within `wait_s`,
        committed; else abandon it (its .tmp directory is never read). No collective: peers may already be gone.
        False when a save was abandoned or failed."""
        upload, self._upload = self._upload, None
        if upload is not None and not upload.done():
            log.warning("abandoned the save of step %d to %s: never committed (no meta.json)", upload.step, upload.uri)
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
        write_meta(pending.tmp, self._meta(pending.step, pending.consumed_samples))
        commit_directory(pending.tmp, pending.final)  # an older save of the same step is replaced by renames
        _fsync_directory(self.directory)
        self._committed_spared = self._at_save.get(pending.step, ({}, None))[1]
        self._prune(self._committed_spared)
        self.stats.save_s = time.perf_counter() - pending.started
        self.stats.bytes = pending.bytes
        log.info("saved checkpoint %s (%s) in %.2fs", pending.final, format_bytes(pending.bytes), self.stats.save_s)

    def _meta(self, step: int, consumed_samples: int) -> dict[str, Any]:
        """meta.json of a checkpoint, in either tier."""
        progress = {"step": step, "consumed_samples": consumed_samples}
        extra, spared = self._at_save.get(step, (self.extra_meta, self.spared_step))
        kept = {} if spared is None else {KEPT_STEP_META: spared}
        meta = {**self.meta, **extra, **kept, **progress}
        return {**meta, "world_size": self.env.world_size, "device_type": self.device_type}

    def _prune(self, spared: int | None = None) -> None:
        for step, path in complete_checkpoints(self.directory)[: -self.config.keep]:
            if step != spared:
                shutil.rmtree(path)
        for stale in leftover_directories(self.directory):
            shutil.rmtree(stale, ignore_errors=True)

    def close(self) -> None:
        if self._stager is not None:
            self._stager.close()
            self._stager = None

    # -- restore ------------------------------------------------------------------------------------------------

    def restore(self, state: TrainState) -> None:
        """Load the checkpoint the run starts from, if any, into `state` (in place): the newest complete one in
        --checkpoint-dir, else the newest complete one of this run's durable tier, else --resume-from's."""
        point = self.resume_point()
        if point is None:
            return
        started = time.perf_counter()
        meta = point.meta
        self.resumed_meta = meta
        # Spared as that save spared it (--keep-best's best) until this run's first save says (train.py note_validation)
        self.spared_step = meta.get(KEPT_STEP_META)
        saved = self._state(state)
        if meta.get("device_type") != self.device_type:
            del saved["rng"]  # a CUDA generator state means nothing on CPU and vice versa
        read_bytes = load_state(saved, point.source, self.io, self.replicas)
        set_state_dict(
            state.model,
            state.optimizer,
            model_state_dict=saved["model"],
            optim_state_dict=saved["optim"],
            options=_state_dict_options(state),
        )
        state.scheduler.load_state_dict(saved["scheduler"])
        state.loss_scaler.load_state_dict(saved["loss_scale"])
        if "rng" in saved:
            _set_rng_state(saved["rng"])
        state.progress = Progress(int(saved["progress"]["step"]), int(saved["progress"]["consumed_samples"]))
        if state.progress.step != point.step:
            raise RuntimeError(f"{point.source}: holds step {state.progress.step}, expected {point.step}")
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
            "resumed from %s, %s (saved by %d ranks, now %d) in %.2fs, %s read",
            point.source,
            point.tier,
            meta.get("world_size"),
            self.env.world_size,
            self.stats.load_s,
            format_bytes(read_bytes),
        )
        if isinstance(point.source, Path):
            self._complete_durable_tier(state)

    def end_early(self, step: int) -> None:
        """Training ends at `step`, before --steps (--early-stop-patience): its checkpoint is the last one, which S3
        must have (trainer/checkpoint/durable.py)."""
        if self.durable is not None:
            self.durable.last_step = step

    def resumed_at_early_stop(self, state: TrainState) -> None:
        """A run started again at the checkpoint where it stopped early trains no further: that step is its last,
        which S3 must have. restore() checked S3 for --steps' checkpoint, not this one (say the stop's S3 write failed
        and the pod was restarted); with --keep-best, spared_step is set first so the best stays there too."""
        self.end_early(state.progress.step)
        self._complete_durable_tier(state)

    def load_model(self, model: nn.Module, step: int) -> Source:
        """The trained weights of checkpoint `step` into `model` (every rank: a collective), from the fast tier, else
        this run's durable tier where it is complete there (its meta.json): the model part of its state dict alone
        (DCP reads only the keys asked for: torch/distributed/checkpoint/default_planner.py
        create_default_local_load_plan plans the given state dict's keys), under LoRA the adapters. Where they came
        from."""
        path = self.directory / checkpoint_name(step)
        source: Source = path
        if not (path / META_FILE).is_file():
            if self.durable is None:
                raise InputError(f"--checkpoint-dir {self.directory}: checkpoint {path.name} is missing")
            source = self.durable.store_uri(step)
            self._require_complete_on_s3(source, path)
        options = _state_dict_options_of(model)
        saved = {"model": get_model_state_dict(model, options=options)}
        load_state(saved, source, self.io, self.replicas)
        set_model_state_dict(model, saved["model"], options=options)
        return source

    def resume_point(self) -> ResumePoint | None:
        """The checkpoint the run starts from, looked for once (every rank alike; rank 0 asks S3 for the others)."""
        if not self._looked_for_resume_point:
            self._resume_at = self._resume_point()
            self._looked_for_resume_point = True
        return self._resume_at

    def restores_every_weight(self) -> bool:
        """Whether restore() will overwrite every weight of the model: a checkpoint to resume from that holds the
        whole model (not a LoRA one, which holds the adapters without the base). The pretrained read is then
        skipped: on a 70B model, minutes of every node per restart for weights overwritten at once."""
        point = self.resume_point()
        return point is not None and not point.meta.get("lora")

    def _require_complete_on_s3(self, uri: S3Uri, missing: Path) -> None:
        """Rank 0 asks S3 whether the checkpoint's meta.json is there (written last: the checkpoint is complete) and
        tells the others: one answer for all, an InputError naming both tiers when it is not."""
        assert self.durable is not None
        problem: list[str | None] = [None]
        if self.env.is_leader:
            try:
                if not self.durable.store.is_complete(uri):
                    problem[0] = (
                        f"checkpoint {missing.name} is complete in neither tier: not in --checkpoint-dir "
                        f"{self.directory}, and {uri} has no {META_FILE} (a save cut short, or one being pruned)"
                    )
            except InputError as error:  # trainer/base/s3/transfer.py S3Error: the URI and S3's error
                problem[0] = f"checkpoint {missing.name}: cannot ask the durable tier: {error}"
        dist.broadcast_object_list(problem, group=self.io, group_src=0)
        if problem[0] is not None:
            raise InputError(problem[0])

    def _resume_point(self) -> ResumePoint | None:
        checkpoints = complete_checkpoints(self.directory)  # every rank reads the shared file system alike
        if checkpoints:
            step, path = checkpoints[-1]
            return ResumePoint(step, path, read_meta(path), FAST_TIER)
        if self.durable is None and self.resume_from is None:
            return None
        # Rank 0 asks S3 and tells the others: one answer for all, also when it is an error.
        found: list[ResumePoint | str | None] = [None]
        if self.env.is_leader:
            try:
                found[0] = self._find_on_s3()
            except InputError as error:
                found[0] = str(error)
        dist.broadcast_object_list(found, group=self.io, group_src=0)
        if isinstance(found[0], str):
            raise InputError(found[0])
        return found[0]

    def _find_on_s3(self) -> ResumePoint | None:
        """Rank 0: the newest complete checkpoint of this run's durable tier, else --resume-from's; an InputError
        naming the URI and S3's error when S3 cannot say, or when --resume-from names no complete checkpoint."""
        if self.durable is not None:
            try:
                complete = self.durable.store.complete()
            except InputError as error:  # trainer/base/s3/transfer.py S3Error: the URI and S3's error
                raise InputError(f"--artifacts-uri: cannot list the checkpoints: {error}") from error
            if complete:
                return self._s3_point(complete[-1].step, complete[-1].uri, DURABLE_TIER)
        if self.resume_from is None:
            return None
        uri = S3Uri.parse(self.resume_from, "--resume-from")
        try:
            found = resume_source(uri)
        except InputError as error:
            raise InputError(f"--resume-from: cannot list the checkpoints: {error}") from error
        if found is None:
            raise InputError(
                f"--resume-from {uri}: no complete checkpoint there (a step_<N> prefix with meta.json, or a prefix "
                "holding them)"
            )
        return self._s3_point(found.step, found.uri, RESUME_FROM)

    def _s3_point(self, step: int, uri: S3Uri, tier: str) -> ResumePoint:
        meta = S3Checkpoints(uri).read_meta(uri)  # an InputError naming the URI and S3's error
        difference = fingerprint_difference(meta, self.meta["model"]) if "model" in self.meta else None
        difference = difference or lora_difference(meta, self.meta.get("lora"))
        if difference:
            raise InputError(f"{tier}: checkpoint {uri} is from an incompatible model ({difference})")
        return ResumePoint(step, uri, meta, tier)

    def _complete_durable_tier(self, state: TrainState) -> None:
        """A run restarted after its last step (say, its final S3 write failed and the job ran again) has nothing
        left to train, so no save would put that step on S3: write it now if S3 lacks it."""
        step = state.progress.step
        if self.durable is None or step != self.durable.last_step:
            return
        missing = [False]
        if self.env.is_leader:
            uri = self.durable.store_uri(step)
            missing[0] = not self.durable.store.is_complete(uri)
        dist.broadcast_object_list(missing, group=self.io, group_src=0)
        if missing[0]:
            saved = self._state(state)
            meta = self._meta(step, state.progress.consumed_samples)
            size = checkpoint_bytes(saved)
            self._upload = self.durable.upload(
                writer_share(saved), step, meta, size, after=None, spared=self.spared_step
            )
            self.finish()


KEPT_STEP_META = "kept_step"
"""meta.json's key for the step that save's retention spared (Checkpointer.spared_step), when there was one."""


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable (POSIX: a rename is persisted by syncing the parent directory)."""
    handle = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
