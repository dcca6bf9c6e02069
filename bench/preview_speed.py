"""How long the Pulumi program takes under the SDK's mocks (what `pulumi preview` spends in the program itself),
per stack, side by side: 1 node against 16 nodes shows the program's cost does not grow with the node count.

    .venv/bin/python bench/preview_speed.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stack.files import raw_stack_config, stack_names  # noqa: E402
from tests.harness.pulumi_program import engine_config  # noqa: E402


def time_stack(stack: str) -> tuple[float, int]:
    """Wall time of one program run in a fresh interpreter (imports included, as in `pulumi preview`)."""
    env = {**os.environ, "PULUMI_CONFIG": engine_config(raw_stack_config(stack))}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "tests.harness.mock_runner", stack, str(out)],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
        )
        elapsed = time.perf_counter() - start
        run = json.loads(out.read_text())
    if run["error"]:
        raise SystemExit(f"{stack}: {run['error']['message']}")
    return elapsed, len(run["resources"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'stack':<10} {'resources':>9} {'median s':>9} {'min s':>7}")
    for stack in stack_names():
        times, count = [], 0
        for _ in range(args.repeat):
            elapsed, count = time_stack(stack)
            times.append(elapsed)
        print(f"{stack:<10} {count:>9} {statistics.median(times):>9.2f} {min(times):>7.2f}")


if __name__ == "__main__":
    main()
