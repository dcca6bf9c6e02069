"""The local run leaves nothing behind when it is interrupted or gives up: no agent, no worker, no etcd."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from local.report import MetricsFollower
from stack.paths import PROJECT_ROOT
from tests.local.runs import TEST_TIMEOUT_S, processes_mentioning, run_dev

pytestmark = [pytest.mark.slow, pytest.mark.timeout(TEST_TIMEOUT_S)]

EXIT_INTERRUPTED = 130


def wait_for_first_step(work_dir: Path, runner: subprocess.Popen[str]) -> None:
    """Until the leader has logged a step (the metrics file lies somewhere under the run's directory)."""
    while runner.poll() is None:
        files = list(work_dir.rglob("metrics.jsonl"))
        if files and MetricsFollower(files[0]).poll():
            return
        time.sleep(0.2)
    raise AssertionError(f"the run ended before its first step: {runner.communicate()}")


def test_ctrl_c_stops_every_process_of_the_run(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "local", "--nodes", "2", "--work-dir", str(tmp_path)]
    runner = subprocess.Popen(command, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_first_step(tmp_path, runner)
        assert processes_mentioning(str(tmp_path)), "expected etcd, agents and workers to be running"
        runner.send_signal(signal.SIGINT)
        output, _ = runner.communicate(timeout=120)
    finally:
        runner.kill()
    assert runner.returncode == EXIT_INTERRUPTED, output
    assert "interrupted; every process it started is stopped" in output
    assert processes_mentioning(str(tmp_path)) == []


def test_a_run_that_times_out_fails_and_stops_every_process(tmp_path: Path) -> None:
    result = run_dev(tmp_path, timeout_s=5.0)
    assert not result.succeeded
    assert "timed out" in result.reason
    assert processes_mentioning(str(tmp_path)) == []
