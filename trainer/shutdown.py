"""Stopping when asked: SIGTERM ends the run cleanly at a step boundary, on every rank at the same one.

Kubernetes stops a pod by sending SIGTERM to its main process, torchrun, which passes it on to its workers and kills
them with SIGKILL --shutdown-timeout seconds later (torch.distributed.run; 30 s by default, the PyTorchJob sets it
from the pod's grace period). Python's default for SIGTERM kills the worker at once, mid-step or mid-save. Here the
signal only sets a flag. Every rank learns of any rank's flag one step later, through a one-integer all-reduce on a
gloo group of its own (started each step, awaited the next, so it never waits): a pod stopped alone (a node drain)
still stops every rank at the same step, and no rank is left waiting in a collective for a peer that left. The run
then finishes the checkpoint being written in the background if it can within --checkpoint-stop-wait-seconds, or
abandons it (its .tmp directory is never read, and the next save deletes it), and exits with 128 + SIGTERM.
"""

from __future__ import annotations

import logging
import signal
from types import FrameType
from typing import Any

import torch
import torch.distributed as dist

log = logging.getLogger(__name__)


class StopRequests:
    """SIGTERM on any rank, agreed on by all of them."""

    def __init__(self, group: dist.ProcessGroup) -> None:
        self.received = False
        self._group = group
        self._flag = torch.zeros(1, dtype=torch.int32)  # host memory: agreeing never touches the GPU
        self._work: Any = None
        self._previous = signal.signal(signal.SIGTERM, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.received = True

    def agreed(self) -> bool:
        """Called by every rank once per step, at the same point: True on all ranks alike, one step after any rank
        received SIGTERM."""
        stop = False
        if self._work is not None:
            self._work.wait()
            stop = bool(self._flag[0])
        self._flag[0] = int(self.received)
        self._work = dist.all_reduce(self._flag, op=dist.ReduceOp.MAX, group=self._group, async_op=True)
        return stop

    def close(self) -> None:
        """Restore the previous handler; a normal end waits for the last exchange so that none is left half done."""
        signal.signal(signal.SIGTERM, self._previous)
        if self._work is not None:
            self._work.wait()
            self._work = None
