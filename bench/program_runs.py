"""CPU time of the tests' runs of __main__.py under the mocks: each stack's run in a new interpreter, as the harness
made it before, against the same runs forked from the warm server (tests/harness/fork_server.py), in alternating
rounds. A served round counts everything the server does: its start, its preloads and its end.

    .venv/bin/python -m bench.program_runs --rounds 2

Prints one row per round and kind: runs, CPU seconds per run (user and system of every process the round started),
wall seconds per run; then the median ratio of CPU per run. Results: docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from stack.files import raw_stack_config, stack_names
from stack.paths import PROJECT_ROOT
from tests.harness.fork_server import ForkServer
from tests.harness.pulumi_program import RUN_TIMEOUT_S, engine_config

RUNNER = "tests.harness.mock_runner"


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def stack_env(stack: str) -> dict[str, str]:
    return {**os.environ, "PULUMI_CONFIG": engine_config(raw_stack_config(stack)), "PULUMI_CONFIG_SECRET_KEYS": "[]"}


def fresh_round(stacks: list[str], tmp: Path) -> None:
    for stack in stacks:
        argv = [sys.executable, "-m", RUNNER, stack, str(tmp / f"{stack}.json"), "update"]
        subprocess.run(argv, cwd=PROJECT_ROOT, env=stack_env(stack), check=True, capture_output=True)


def served_round(stacks: list[str], tmp: Path) -> None:
    server = ForkServer()
    try:
        for stack in stacks:
            argv = [stack, str(tmp / f"{stack}.json"), "update"]
            status = server.run(RUNNER, argv, stack_env(stack), PROJECT_ROOT, tmp / "log", RUN_TIMEOUT_S)
            assert status == 0, (tmp / "log").read_text()
    finally:
        server.close()  # waited for: its CPU time and its children's count below


def measured(round_of: Callable[[list[str], Path], None], stacks: list[str]) -> tuple[float, float]:
    """CPU and wall seconds per run of one round."""
    with tempfile.TemporaryDirectory() as tmp:
        cpu, wall = children_cpu_s(), time.perf_counter()
        round_of(stacks, Path(tmp))
        return (children_cpu_s() - cpu) / len(stacks), (time.perf_counter() - wall) / len(stacks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    stacks = stack_names()
    rounds = parser.parse_args().rounds
    print(f"{'round':>5}  {'kind':<6}  {'runs':>4}  {'CPU s/run':>9}  {'wall s/run':>10}  load")
    ratios = []
    for index in range(1, rounds + 1):
        cpu = {}
        for kind, round_of in (("fresh", fresh_round), ("served", served_round)):
            cpu[kind], wall = measured(round_of, stacks)
            load = os.getloadavg()[0]
            print(f"{index:>5}  {kind:<6}  {len(stacks):>4}  {cpu[kind]:>9.2f}  {wall:>10.2f}  {load:.1f}", flush=True)
        ratios.append(cpu["fresh"] / cpu["served"])
    print(f"median CPU per run, fresh / served: {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
