"""A runner for the fork server's tests (tests/test_fork_server.py): writes to OUT, as JSON, what its run sees (argv,
working directory, environment, __name__, the modules already loaded when it started), imports a module of the
project and a third-party one, writes a line to stdout and one to stderr, then sleeps SLEEP_S seconds and exits with
STATUS: a number, or a message (sys.exit("message")).

Usage: python -m tests.harness.probe_runner OUT [STATUS [SLEEP_S]]
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

LOADED_AT_START = sorted(sys.modules)

import yaml  # noqa: E402 - after the modules found loaded are noted

from stack import paths  # noqa: E402

if __name__ == "__main__":
    out, *rest = sys.argv[1:]
    status = (int(rest[0]) if rest[0].isdigit() else rest[0]) if rest else 0
    sleep_s = float(rest[1]) if len(rest) > 1 else 0.0
    seen = {
        "argv": sys.argv,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "name": __name__,
        "loaded_at_start": LOADED_AT_START,
        "imported": [yaml.__name__, paths.__name__],
    }
    Path(out).write_text(json.dumps(seen))
    print("to stdout")
    print("to stderr", file=sys.stderr)
    time.sleep(sleep_s)
    sys.exit(status)
