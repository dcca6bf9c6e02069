"""Run the trainer with rank 0's main thread held once it has started the background save of step PROBE_HOLD_STEP, as a
training collective waiting for a lost peer holds it under NCCL.

Launched like the trainer (`torchrun ... -m tests.trainer.commit_probe <trainer flags>`), it runs `trainer.main.main`
unchanged but for `Checkpointer.save`, which on rank 0, after the save of that step has returned, does not return to
the training loop: the main thread waits inside a receive from rank 1 that rank 1 never sends, in C++ (gloo), where
Python runs no signal handler, as it would wait inside an NCCL collective. A watcher thread, which touches nothing of
the checkpointer, looks at the checkpoint directory for up to PROBE_HOLD_S seconds for that step to appear committed,
writes `committed` or `not committed` to the file PROBE_OUTPUT, and ends the process (the other ranks, left inside a
collective with it, fail and torchrun stops them). Keep PROBE_HOLD_S under --timeout-minutes, the receive's timeout.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

HOLD_STEP_ENV, HOLD_S_ENV, OUTPUT_ENV = "PROBE_HOLD_STEP", "PROBE_HOLD_S", "PROBE_OUTPUT"


def hold_until_committed(directory: Path, step: int, hold_s: float) -> bool:
    """Sleep-poll the directory (no checkpointer call) until `step` is a complete checkpoint, or `hold_s` passes."""
    from trainer.checkpoint.layout import complete_checkpoints

    deadline = time.monotonic() + hold_s
    while True:
        committed = step in [saved for saved, _ in complete_checkpoints(directory)]
        if committed or time.monotonic() > deadline:
            return committed
        time.sleep(0.1)


def watch_and_exit(directory: Path, step: int, hold_s: float) -> None:
    committed = hold_until_committed(directory, step, hold_s)
    Path(os.environ[OUTPUT_ENV]).write_text("committed" if committed else "not committed")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # at once: the main thread is stuck, and exit handlers would wait for DCP's writer thread


def main(argv: list[str]) -> int:
    import torch
    import torch.distributed as dist

    from trainer.checkpoint.checkpointer import Checkpointer, TrainState
    from trainer.main import main as trainer_main

    hold_step, hold_s = int(os.environ[HOLD_STEP_ENV]), float(os.environ.get(HOLD_S_ENV, "45"))
    save = Checkpointer.save

    def held_save(self: Checkpointer, state: TrainState) -> Any:
        save(self, state)
        if self.env.is_leader and state.progress.step == hold_step:
            watcher = threading.Thread(target=watch_and_exit, args=(self.directory, hold_step, hold_s), daemon=True)
            watcher.start()
            dist.recv(torch.zeros(1), src=1, tag=hold_step)  # never sent: blocked in gloo until the watcher exits

    Checkpointer.save = held_save  # type: ignore[method-assign]
    return trainer_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
