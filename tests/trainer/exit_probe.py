"""A worker for the launcher's tests that exits at once with a given code, marking each start.

    python -m trainer.launch --standalone --nproc-per-node=1 --max-restarts=2 -m tests.trainer.exit_probe \\
        --marks DIR --code 2

It writes DIR/started.<pid> each time it starts, so a test counts how often torchrun started the worker group.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--marks", type=Path, required=True)
    parser.add_argument("--code", type=int, required=True)
    args = parser.parse_args()
    args.marks.mkdir(parents=True, exist_ok=True)
    (args.marks / f"started.{os.getpid()}").touch()
    return args.code


if __name__ == "__main__":
    sys.exit(main())
