"""A worker whose main thread blocks in a collective that never completes, as NCCL leaves the peers of a crashed rank,
with the trainer's SIGTERM handler installed (trainer/base/pod/shutdown.py).

    torchrun --standalone --nproc-per-node=2 -m tests.trainer.blocked_probe --marks DIR

Rank 1 marks DIR/blocked.<pid> and waits in a gloo recv from rank 0, which never sends: it keeps its end of the
connection open (it sleeps), so the recv neither completes nor fails. A SIGTERM to rank 1 then finds its main thread
in C, where no Python handler runs; the handler's watcher thread must end it.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from trainer.base.pod.shutdown import SigtermHandler


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--marks", type=Path, required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    dist.init_process_group("gloo")
    if dist.get_rank() == 0:
        while True:
            time.sleep(3600)
    SigtermHandler(checkpointer=None, wait_s=0.0)
    (args.marks / f"blocked.{os.getpid()}").touch()
    dist.recv(torch.zeros(1), src=0)  # never sent
    return 0


if __name__ == "__main__":
    sys.exit(main())
