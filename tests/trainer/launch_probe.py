"""A worker for the launcher's tests, in the trainer's place: it marks that it started, then waits for SIGTERM and
takes --settle-seconds to stop, as the trainer does while it settles a checkpoint (trainer/base/pod/shutdown.py).

    python -m trainer.launch --standalone --nproc-per-node=1 -m tests.trainer.launch_probe --marks DIR
    python -m tests.trainer.launch_probe --marks DIR --settle-seconds 8
    python -m tests.trainer.launch_probe --marks DIR --finish     # exits 0 at once: a run that completes

It writes DIR/started.<pid> on start and DIR/settled.<pid> once it has settled after SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--marks", type=Path, required=True)
    parser.add_argument("--settle-seconds", type=float, default=0.0)
    parser.add_argument("--finish", action="store_true")
    args = parser.parse_args()

    def settle(signum: int, frame: FrameType | None) -> None:
        time.sleep(args.settle_seconds)
        (args.marks / f"settled.{os.getpid()}").touch()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)  # ends as the trainer's handler ends it

    signal.signal(signal.SIGTERM, settle)
    args.marks.mkdir(parents=True, exist_ok=True)
    (args.marks / f"started.{os.getpid()}").touch()
    if args.finish:
        return 0
    while True:
        time.sleep(0.1)


if __name__ == "__main__":
    sys.exit(main())
