"""A save in flight and its commit: resolved once, by whichever thread sees the save complete first.

Rank 0 commits a background save (trainer/checkpoint/layout.py: meta.json, then the rename) from the save's own
future, in DCP's writer thread, the moment the save completes: not when its main thread next comes by. With NCCL, a
peer that is lost leaves the main thread blocked inside a training collective until that collective's timeout (NCCL
does not fail, it waits), and Python runs a signal handler only in the main thread, between bytecodes: neither the
poll between steps nor the SIGTERM handler's settle would run before the pod is killed, and a checkpoint whose every
shard is written would be lost.

What rank 0's future completing means (torch/distributed/checkpoint/state_dict_saver.py, `_save_state_dict`): the
write step is `distW.all_reduce("write", write_data, finish_checkpoint)` over the save's process group (the gloo io
group). `_DistWrapper.all_reduce` (checkpoint/utils.py) gathers every rank's write result on the coordinator,
rank 0, calls `finish_checkpoint` only when no rank reported a failure, and then broadcasts the outcome. So rank 0's
future succeeds only once every rank's shards are written, and `finish_checkpoint` (FileSystemWriter.finish:
`.metadata` written under a temporary name, then renamed) has run. `.metadata` in the save's directory therefore
means every shard is written even where the broadcast after it failed (a peer that left right after sending its
result): rank 0 commits that save too, and still reports the failure.

The future's done-callback, the poll between steps, finish() and the SIGTERM handler's settle() all go through
`Commits.resolve`, under one lock: the first to find the save complete commits it (or records its failure), the others
find it resolved. Pruning runs under the same lock (`Commits.locked`), so nothing is deleted beside a commit.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from trainer.checkpoint.layout import DCP_METADATA_FILE

log = logging.getLogger(__name__)


class Outcome(enum.Enum):
    COMMITTED = "committed"
    """Rank 0: renamed into place. Other ranks: written (rank 0 commits it)."""
    FAILED = "failed"
    """The write or the commit failed: the .tmp directory stays, never read."""
    ABANDONED = "abandoned"
    """Still writing when the process had to end (SIGTERM): never committed, even if the write finishes later."""


class BackgroundWrite:
    """A write that may run in another thread: `future` is its Future, None where it ran synchronously (written by
    the time it is tracked). Shared by the fast tier's PendingSave and the durable tier's Upload."""

    future: Future | None

    def done(self) -> bool:
        return self.future is None or self.future.done()

    def wait(self, timeout: float | None = None) -> None:
        """Until the write is done or `timeout` seconds have passed; a failed write does not raise here."""
        if self.future is not None:
            wait([self.future], timeout=timeout)


@dataclass
class PendingSave(BackgroundWrite):
    step: int
    consumed_samples: int
    tmp: Path
    final: Path
    started: float
    bytes: int
    future: Future | None
    """DCP's async_save future; None for a synchronous save (written by the time it is tracked)."""
    outcome: Outcome | None = None
    """Set once, under Commits' lock."""
    error: BaseException | None = None
    """The write's or the commit's failure, raised on the main thread by poll() or finish()."""

    def raise_failure(self) -> None:
        if self.error is not None:
            raise self.error


class Commits:
    """Resolves saves exactly once, whichever thread gets there first; `commit` does the commit itself (rank 0)."""

    def __init__(self, commit: Callable[[PendingSave], None], is_leader: bool) -> None:
        self._commit = commit
        self._is_leader = is_leader
        # Not re-entrant, and needs not be: the main thread takes it only inside the checkpointer's calls, which the
        # SIGTERM handler does not interrupt (trainer/base/pod/shutdown.py held()); DCP's writer thread takes it in the
        # done-callback, which add_done_callback runs in the calling thread only for a future already done.
        self._lock = threading.Lock()

    @contextmanager
    def locked(self) -> Iterator[None]:
        """A block no commit runs beside (pruning)."""
        with self._lock:
            yield

    def track(self, pending: PendingSave) -> None:
        """Resolve `pending` as soon as its write completes, in the thread that completes it."""
        if pending.future is not None:
            # concurrent.futures runs done-callbacks in the thread that sets the result (Future.set_result ->
            # _invoke_callbacks): DCP's writer thread (_ThreadBasedAsyncCheckpointExecutor), or this one if it is
            # done already. It logs and drops what a callback raises, so resolve() records failures instead.
            pending.future.add_done_callback(lambda _: self.resolve(pending))

    def resolve(self, pending: PendingSave, abandon: bool = False) -> Outcome | None:
        """Commit a completed save once, or record its failure; with `abandon`, a save still writing is given up.
        None while it is still writing (and not abandoned)."""
        with self._lock:
            if pending.outcome is None:
                if pending.done():
                    pending.outcome = self._complete(pending)
                elif abandon:
                    pending.outcome = Outcome.ABANDONED
            return pending.outcome

    def _complete(self, pending: PendingSave) -> Outcome:
        failure = pending.future.exception() if pending.future is not None else None
        pending.error = failure
        if failure is not None and not (self._is_leader and (pending.tmp / DCP_METADATA_FILE).is_file()):
            return Outcome.FAILED
        if failure is not None:
            log.warning(
                "the save of step %d failed after every rank's shards were written (%s): committing it",
                pending.step,
                type(failure).__name__,
            )
        if self._is_leader:
            try:
                self._commit(pending)
            except Exception as error:  # the main thread raises it (poll, finish); here it is only recorded
                log.error("the commit of step %d failed: %s", pending.step, error)
                pending.error = pending.error or error
                return Outcome.FAILED
        return Outcome.COMMITTED
