"""SIGTERM: the checkpoint being saved is finished or abandoned cleanly, then the process ends as SIGTERM ends it.

Kubernetes stops a pod by sending SIGTERM to its main process, torchrun, which passes it on to its workers and kills
them with SIGKILL --shutdown-timeout seconds later (torch.distributed.run; 30 s unless set: the PyTorchJob sets it
from the pod's grace period). Python's default for SIGTERM ends a worker at once, in the middle of whatever it does.
The handler first settles a checkpoint whose shards are being (or have been) written but which is not yet committed:
it waits up to --checkpoint-stop-wait-seconds for the write and then commits it (rank 0), or abandons it (its .tmp
directory is never read, and the next save deletes it). Then it ends the process with SIGTERM's default action, as
promptly as before: a worker that lingered would delay its agent's own exit, and with it the agent's shutdown of the
rendezvous, past the point where a restarted rendezvous store (the restart-etcd drill) would record it as closed.
"""

from __future__ import annotations

import logging
import os
import signal
from types import FrameType
from typing import Protocol

log = logging.getLogger(__name__)


class Settles(Protocol):
    def settle(self, wait_s: float) -> bool: ...


class SigtermHandler:
    """Installed for the training loop; `close` puts the previous handler back."""

    def __init__(self, checkpointer: Settles | None, wait_s: float) -> None:
        self.checkpointer, self.wait_s = checkpointer, wait_s
        self._previous = signal.signal(signal.SIGTERM, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        settled = self.checkpointer.settle(self.wait_s) if self.checkpointer else True
        log.warning("SIGTERM: exiting%s", "" if settled else "; the save in progress was abandoned")
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    def close(self) -> None:
        signal.signal(signal.SIGTERM, self._previous)
