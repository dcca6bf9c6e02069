"""SIGTERM: the checkpoint being saved is finished or abandoned cleanly, then the process ends as SIGTERM ends it.

Kubernetes stops a pod by sending SIGTERM to its main process, the launcher (trainer/launch/launcher.py, torchrun in
that process), which passes it on to its workers and kills them with SIGKILL --shutdown-timeout seconds later
(torch.distributed.run; 30 s unless set: the PyTorchJob sets it from the pod's grace period). Python's default for
SIGTERM ends a worker at once, in the middle of whatever it does. The handler first settles a checkpoint whose shards
are being (or have been) written but which is not yet committed: it waits up to --checkpoint-stop-wait-seconds for the
write and then commits it (rank 0), or abandons it (its .tmp directory is never read, and the next save deletes it).
Then it ends the process with SIGTERM's default action, so that the agent sees its workers stopped as soon as they
are settled.

The handler runs in the main thread only, between bytecodes (Python's signal module): a main thread blocked inside a
collective (NCCL waits for a lost peer until its timeout) never runs it. So the handler is not what saves a
background write that completes meanwhile: rank 0 commits that in the save's own thread as it completes
(trainer/checkpoint/commit.py), and settle() here finds it committed, or commits it first, under the same lock.

The signal reaches each rank wherever that rank is, also inside the checkpointer's own calls: a save that has begun
but whose write is not yet registered (the staging copy of an async save takes a while), or a commit half done.
Ending the rank there would leave its shards unwritten and fail its peers' write too; so those calls run `held()`,
and a SIGTERM that arrives meanwhile is acted on when they return, when the save is one the handler can settle.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Protocol

log = logging.getLogger(__name__)


class Settles(Protocol):
    def settle(self, wait_s: float) -> bool: ...


class SigtermHandler:
    """Installed for the training loop; `close` puts the previous handler back."""

    def __init__(self, checkpointer: Settles | None, wait_s: float) -> None:
        self.checkpointer, self.wait_s = checkpointer, wait_s
        self._holding = 0  # depth of held() blocks
        self._arrived = False  # a SIGTERM came during one
        self._previous = signal.signal(signal.SIGTERM, self._on_signal)

    @contextmanager
    def held(self) -> Iterator[None]:
        """A block a SIGTERM does not interrupt: it is acted on once the block is done."""
        self._holding += 1
        try:
            yield
        finally:
            self._holding -= 1
            if self._arrived and not self._holding:
                self._stop()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._holding:
            self._arrived = True
            return
        self._stop()

    def _stop(self) -> None:
        settled = self.checkpointer.settle(self.wait_s) if self.checkpointer else True
        log.warning("SIGTERM: exiting%s", "" if settled else "; the save in progress was abandoned")
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    def close(self) -> None:
        signal.signal(signal.SIGTERM, self._previous)
