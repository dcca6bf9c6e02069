"""The durable tier: checkpoints written to S3 as well (--artifacts-uri), with the S3 connector's DCP writer.

--checkpoint-dir (FSx for Lustre on the cluster) stays the fast tier: every checkpoint goes there first, committed by
its rename. The steps chosen by --s3-checkpoint-every (0: every checkpoint), and always the last step, then go to
`<artifacts-uri>/checkpoints/step_<N>/` too, committed by meta.json (trainer/checkpoint/s3_store.py). The write to S3
starts once the fast tier's write is done, from the same state dict: synchronous saves write it in the main thread,
background saves (--async-checkpoint) in a thread of their own, from the copy in host memory that the fast tier's
write read. It is one save with the fast tier's: the next save, and the end of training, wait for both.

An S3 write that fails (the bucket unreachable, access denied) costs the durable copy of that step only: a warning
names the URI and the error, the metrics count it, and training goes on from an intact fast tier. The last step's is
different: a run that ends without its final checkpoint on S3 would lose it with the stack, so it fails the run on
every rank (finish(), trainer/checkpoint/checkpointer.py).
"""

from __future__ import annotations

import logging
import re
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException

from trainer.base.checkpoint.space import format_bytes
from trainer.base.flags.config import ArtifactsConfig
from trainer.base.s3.uri import S3Uri
from trainer.checkpoint.commit import BackgroundWrite
from trainer.checkpoint.s3_store import S3Checkpoint, S3Checkpoints, checkpoint_uri, checkpoints_root
from trainer.checkpoint.stats import CheckpointStats

log = logging.getLogger(__name__)

# S3's error document (Amazon S3 API reference, "Error responses"), which the CRT client's S3Exception quotes whole.
_S3_ERROR = re.compile(r"<Code>(?P<code>[^<]*)</Code>\s*<Message>(?P<message>[^<]*)</Message>")


def describe(error: BaseException) -> str:
    """One line for a failed S3 write: each failed rank's error, in S3's words ("NoSuchBucket: The specified bucket
    does not exist") where the error quotes S3's error document. DCP's CheckpointException carries every failed
    rank's exception and traceback (torch/distributed/checkpoint/api.py), too much for a warning."""
    if isinstance(error, CheckpointException):
        return "; ".join(f"rank {rank}: {describe(failure)}" for rank, (failure, _) in sorted(error.failures.items()))
    text = str(error)
    found = _S3_ERROR.search(text)
    return f"{found['code']}: {found['message']}" if found else f"{type(error).__name__}: {text}"


class DurableSaveError(RuntimeError):
    """The last step's checkpoint did not reach S3: the run fails rather than end without it."""


@dataclass
class Upload(BackgroundWrite):
    """One checkpoint's write to S3, and its outcome (set once, by the thread that writes it)."""

    step: int
    uri: S3Uri
    final: bool
    """The last step's: its failure fails the run."""
    started: float
    bytes: int
    future: Future | None = None
    """The background write; None for one written synchronously."""
    error: BaseException | None = None
    spared: int | None = None
    """The step whose checkpoint the prune after this commit keeps whatever its age (--keep-best's)."""


class DurableTier:
    def __init__(
        self,
        artifacts: ArtifactsConfig,
        keep: int,
        threads: int,
        last_step: int,
        is_leader: bool,
        io: dist.ProcessGroup,
        stats: CheckpointStats,
    ) -> None:
        assert artifacts.uri is not None
        self.root = checkpoints_root(artifacts.uri)
        self.every = artifacts.checkpoint_every
        self.keep, self.threads, self.last_step = keep, threads, last_step
        self.is_leader, self.io, self.stats = is_leader, io, stats
        self._store: S3Checkpoints | None = None

    @property
    def store(self) -> S3Checkpoints:
        """Rank 0's S3 client for listing, meta.json and pruning (made on first use: only rank 0 needs one)."""
        if self._store is None:
            self._store = S3Checkpoints(self.root)
        return self._store

    def store_uri(self, step: int) -> S3Uri:
        return checkpoint_uri(self.root, step)

    def wanted(self, step: int) -> bool:
        return self.every == 0 or step % self.every == 0 or step == self.last_step

    def upload(
        self,
        state: dict[str, Any],
        step: int,
        meta: dict[str, Any],
        size: int,
        after: Future | None,
        spared: int | None = None,
    ) -> Upload:
        """Write `state` (step `step`) to S3 and commit it with `meta`. With `after` (the fast tier's background
        write of the same state), in a thread of its own once that write has succeeded; else now. `spared`: a step
        the prune after the commit keeps."""
        upload = Upload(step, self.store_uri(step), step == self.last_step, time.perf_counter(), size, spared=spared)
        if after is None:
            self._write(upload, state, meta)
            return upload
        # One worker: this save's S3 write alone, after the fast tier's (whose thread is DCP's own).
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="S3Checkpoint")
        upload.future = executor.submit(self._write_after, after, upload, state, meta)
        upload.future.add_done_callback(lambda _: executor.shutdown(wait=False))
        return upload

    def _write_after(self, fast: Future, upload: Upload, state: dict[str, Any], meta: dict[str, Any]) -> None:
        wait([fast])
        if fast.exception() is not None:
            # Every rank sees the fast tier's failure (DCP broadcasts it), so every rank skips this write alike, and
            # the main thread fails the run with it (Checkpointer.poll, finish).
            upload.error = RuntimeError(f"not written: the save to --checkpoint-dir failed ({fast.exception()!r})")
            return
        self._write(upload, state, meta)

    def _write(self, upload: Upload, state: dict[str, Any], meta: dict[str, Any]) -> None:
        """Every rank: its shards, through DCP's collective save; then rank 0 commits. Records the outcome, raises
        nothing (a non-final failure must not stop training)."""
        cleared: BaseException | None = None
        if self.is_leader:
            try:
                self.store.delete(upload.uri)  # an older save of this step: meta.json first, then its objects
            except Exception as error:  # still join the collective save below: the other ranks are in it
                cleared = error
        try:
            from trainer.base.s3.dcp import S3Writer  # the S3 connector: only where a run writes checkpoints to S3

            # get_world_size: `io` may be None, torch.distributed's default group, which has no size() of its own
            writer = S3Writer(upload.uri, dist.get_world_size(self.io), self.threads)
            dcp.save(state, storage_writer=writer, process_group=self.io)
            if self.is_leader:
                if cleared is not None:
                    raise cleared
                self.store.write_meta(upload.uri, meta)
        except (Exception, CheckpointException) as error:  # CheckpointException is a BaseException
            upload.error = error
            if self.is_leader:
                self.stats.s3_failed_saves += 1
                if not upload.final:
                    log.warning(
                        "checkpoint of step %d not saved to %s: %s; training goes on (the copy in --checkpoint-dir "
                        "is intact)",
                        upload.step,
                        upload.uri,
                        describe(error),
                    )
            return
        if self.is_leader:
            self.stats.s3_save_s = time.perf_counter() - upload.started
            self.stats.s3_bytes = upload.bytes
            log.info("saved checkpoint %s (%s) in %.2fs", upload.uri, format_bytes(upload.bytes), self.stats.s3_save_s)
            self._prune(upload.spared)

    def _prune_sparing(self, spared: int) -> list[S3Checkpoint]:
        """S3Checkpoints.prune, but the checkpoint of step `spared` stays whatever its age (--keep-best's best)."""
        found = self.store.all()
        complete = [checkpoint for checkpoint in found if checkpoint.complete]
        old = complete[: max(len(complete) - self.keep, 0)]
        doomed = [c for c in old if c.step != spared] + [c for c in found if not c.complete]
        for checkpoint in doomed:
            self.store.delete(checkpoint.uri)
        return doomed

    def _prune(self, spared: int | None = None) -> None:
        """After a commit; a failure here costs only space (the next prune tries again)."""
        try:
            pruned = self.store.prune(self.keep) if spared is None else self._prune_sparing(spared)
        except Exception as error:
            log.warning("could not prune the checkpoints under %s: %s", self.root, error)
            return
        for gone in pruned:
            log.info("deleted %s (%s)", gone.uri, "older" if gone.complete else "incomplete")
