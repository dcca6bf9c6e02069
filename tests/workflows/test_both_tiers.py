"""scripts/test-both-tiers.sh, `make test`'s pytest: both parts run, at once, and either one's failure fails it.

A stand-in Python records each pytest it is asked for (its arguments, when it began and ended) and exits as the test
says for that part."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.workflows.workflows import ROOT

SCRIPT = ROOT / "scripts" / "test-both-tiers.sh"
STAND_IN = """#!/usr/bin/env bash
# python -m pytest ... -m EXPRESSION ...: the expression names the part
part=""
previous=""
for argument in "$@"; do
    [ "$previous" = "-m" ] && part="${argument// /_}"
    previous="$argument"
done
echo "began ${part} $(date +%s.%N) $*" >> "$CALLS"
sleep 0.5
echo "ended ${part} $(date +%s.%N)" >> "$CALLS"
echo "output of ${part}"
case "$part" in
    slow) exit "$SLOW_EXIT" ;;
    not_slow) exit "$OTHERS_EXIT" ;;
    *) exit 99 ;;
esac
"""


def run_script(tmp_path: Path, slow_exit: int, others_exit: int) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    python = tmp_path / "python"
    python.write_text(STAND_IN)
    python.chmod(0o755)
    calls = tmp_path / "calls"
    env = {"PATH": "/usr/bin:/bin", "CALLS": str(calls), "SLOW_EXIT": str(slow_exit), "OTHERS_EXIT": str(others_exit)}
    done = subprocess.run([str(SCRIPT), str(python), "-x"], env=env, capture_output=True, text=True, timeout=60)
    return done, calls.read_text().splitlines()


@pytest.mark.parametrize(("slow_exit", "others_exit", "passes"), [(0, 0, True), (1, 0, False), (0, 1, False)])
def test_both_parts_run_at_once_and_either_ones_failure_fails_it(
    tmp_path: Path, slow_exit: int, others_exit: int, passes: bool
) -> None:
    done, calls = run_script(tmp_path, slow_exit, others_exit)
    assert (done.returncode == 0) is passes, done.stdout + done.stderr
    began = {line.split()[1]: float(line.split()[2]) for line in calls if line.startswith("began")}
    ended = {line.split()[1]: float(line.split()[2]) for line in calls if line.startswith("ended")}
    assert set(began) == {"slow", "not_slow"}
    assert max(began.values()) < min(ended.values()), "the two parts ran one after the other, not at once"
    assert all("-x" in line and "-p no:cacheprovider" in line for line in calls if line.startswith("began"))
    assert done.stdout.index("output of slow") < done.stdout.index("output of not_slow")  # the others' output follows
    assert f"slow tests: exit {slow_exit}; the other tests: exit {others_exit}" in done.stdout
