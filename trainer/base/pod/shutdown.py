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

Nor can such a rank wait for its handler: on a real node a crash leaves every other rank's main thread inside a
collective, and torchrun, which stops them with SIGTERM when it restarts the group, would wait its full 30 s (longer,
--shutdown-timeout, when the pod is stopped) before SIGKILL, on every node in turn. So the handler also has a
watcher: a thread reading the signal module's wakeup fd, to which CPython's C-level handler writes the signal's
number as it arrives, whatever the main thread is doing (signal.set_wakeup_fd). When the main thread has not begun
the handler within MAIN_THREAD_GRACE_S of a SIGTERM, it is taken to be blocked: the watcher logs where it is, settles
what needs no collective (the same settle(): wait for a background write, commit it on rank 0, or abandon it) and
ends the process with SIGTERM's exit code. Whichever of the two starts first stops the process; the other does not.

The signal reaches each rank wherever that rank is, also inside the checkpointer's own calls: a save that has begun
but whose write is not yet registered (the staging copy of an async save takes a while), or a commit half done.
Ending the rank there would leave its shards unwritten and fail its peers' write too; so those calls run `held()`,
and a SIGTERM that arrives meanwhile is acted on when they return, when the save is one the handler can settle.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Protocol

from trainer.base.pod.exits import exit_for_signal

log = logging.getLogger(__name__)
# How long the main thread may take to begin the SIGTERM handler before the watcher takes it as blocked: Python runs a
# handler at the next bytecode, well under a second even on a busy CPU; a main thread inside a long C call that does
# return (a large matmul) loses nothing to the watcher, which settles the same way.
MAIN_THREAD_GRACE_S = 1.0
MAIN_THREAD_FRAMES = 4  # innermost frames of the blocked main thread that the log names
CLOSING = 0  # written to the wakeup pipe by close(): no signal has the number 0


class Settles(Protocol):
    def settle(self, wait_s: float) -> bool: ...


class SigtermHandler:
    """Installed for the training loop, in the main thread; `close` puts the previous handler and wakeup fd back."""

    def __init__(self, checkpointer: Settles | None, wait_s: float, grace_s: float = MAIN_THREAD_GRACE_S) -> None:
        self.checkpointer, self.wait_s, self.grace_s = checkpointer, wait_s, grace_s
        self._holding = 0  # depth of held() blocks
        self._arrived = False  # a SIGTERM came during one
        self._main_began = threading.Event()  # the main thread entered the handler: the watcher stands down
        self._stopping = threading.Lock()  # held by whichever thread settles and ends the process
        self._previous = signal.signal(signal.SIGTERM, self._on_signal)
        self._wakeup_read, wakeup_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        os.set_blocking(self._wakeup_read, True)  # the watcher blocks on it; the C handler must never block writing
        self._previous_wakeup = signal.set_wakeup_fd(wakeup_write, warn_on_full_buffer=False)
        self._wakeup_write = wakeup_write
        self._watcher = threading.Thread(target=self._watch, name="sigterm-watcher", daemon=True)
        self._watcher.start()

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
        self._main_began.set()
        if self._holding:
            self._arrived = True
            return
        self._stop()

    def _stop(self) -> None:
        if not self._stopping.acquire(blocking=False):
            threading.Event().wait()  # the watcher is ending the process; nothing else may run meanwhile
        settled = self.checkpointer.settle(self.wait_s) if self.checkpointer else True
        log.warning("SIGTERM: exiting%s", "" if settled else "; the save in progress was abandoned")
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    def _watch(self) -> None:
        """The watcher thread: for each SIGTERM, give the main thread MAIN_THREAD_GRACE_S to begin the handler, then
        stop the process from here."""
        while True:
            arrived = os.read(self._wakeup_read, 64)
            if signal.SIGTERM in arrived and not self._main_began.wait(self.grace_s):
                self._stop_for_blocked_main_thread()
            if CLOSING in arrived:  # close(): the training loop is over
                return

    def _stop_for_blocked_main_thread(self) -> None:
        if not self._stopping.acquire(blocking=False):
            return  # the main thread began after all
        log.warning(
            "SIGTERM: the main thread has not run its handler in %.0f s, blocked in %s; settling from the watcher",
            self.grace_s,
            main_thread_position(),
        )
        settled = self.checkpointer.settle(self.wait_s) if self.checkpointer else True
        log.warning("SIGTERM: exiting%s", "" if settled else "; the save in progress was abandoned")
        logging.shutdown()
        # Only the main thread may restore SIGTERM's default action; the exit code says what SIGTERM would have.
        os._exit(exit_for_signal(signal.SIGTERM))

    def close(self) -> None:
        signal.signal(signal.SIGTERM, self._previous)
        signal.set_wakeup_fd(self._previous_wakeup)
        # Closing the pipe would not wake a thread blocked reading it (and its number could be reused under it).
        os.write(self._wakeup_write, bytes([CLOSING]))
        self._watcher.join()
        os.close(self._wakeup_write)
        os.close(self._wakeup_read)


def main_thread_position() -> str:
    """The main thread's innermost Python frames, innermost last ("file:line function < ..."), for the log."""
    frame = sys._current_frames().get(threading.main_thread().ident or 0)
    frames = traceback.extract_stack(frame)[-MAIN_THREAD_FRAMES:] if frame is not None else []
    return " < ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(frames)) or "(unknown)"
