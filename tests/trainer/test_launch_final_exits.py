"""A worker's exit that no restart can change ends the run at once: the agent spends none of --max-restarts on it, the
launcher exits with the worker's code (3: checkpoint storage full; 2: bad input) and closes the rendezvous, and the
operator fails the job (trainer/launch/agent.py, trainer/launch/launcher.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure
from torch.distributed.launcher import api as launcher_api

from tests.harness.trainer_runs import ROOT, TINY, run_trainer, trainer_env, with_flags
from trainer.base.faults import FAKE_DISK_ENV
from trainer.base.pod.exits import EXIT_BAD_ARGUMENTS, EXIT_NO_SPACE, EXIT_PERMANENT, REASON_PREFIX
from trainer.launch.agent import FinalExitsAgent, final_worker_exits_end_the_run
from trainer.launch.launcher import ending

MAX_RESTARTS = 2


def failed(*codes: int) -> ChildFailedError:
    failures = {
        rank: ProcessFailure(local_rank=rank, pid=4242 + rank, exitcode=code, error_file="<N/A>")
        for rank, code in enumerate(codes)
    }
    return ChildFailedError("trainer", failures)


@pytest.mark.parametrize("code", [EXIT_NO_SPACE, EXIT_BAD_ARGUMENTS])
def test_a_final_worker_exit_is_the_launchers_exit_and_closes_the_rendezvous(code: int) -> None:
    end = ending(failed(-signal.SIGKILL, code))
    assert (end.code, end.closes_rendezvous) == (code, True)
    assert "rank 1 exited" in end.reason and "no restart was spent" in end.reason


def test_any_other_worker_failure_stays_exit_1() -> None:
    assert ending(failed(1, -signal.SIGKILL)).code == EXIT_PERMANENT


def test_torchs_agent_class_is_swapped_only_while_the_launch_runs() -> None:
    original = launcher_api.LocalElasticAgent
    with final_worker_exits_end_the_run():
        assert launcher_api.LocalElasticAgent is FinalExitsAgent
    assert launcher_api.LocalElasticAgent is original


def launch_probe(marks: Path, code: int) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "trainer.launch", "--standalone", "--nnodes=1", "--nproc-per-node=1"]
    command += [f"--max-restarts={MAX_RESTARTS}", "--monitor-interval=0.1"]
    command += ["-m", "tests.trainer.exit_probe", "--marks", str(marks), "--code", str(code)]
    return subprocess.run(command, cwd=ROOT, env=trainer_env(), capture_output=True, text=True, timeout=120)


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_a_worker_exiting_with_bad_input_is_started_once_and_the_launcher_exits_2(tmp_path: Path) -> None:
    result = launch_probe(tmp_path / "marks", EXIT_BAD_ARGUMENTS)
    assert result.returncode == EXIT_BAD_ARGUMENTS, result.stderr
    assert len(list((tmp_path / "marks").glob("started.*"))) == 1
    assert result.stderr.splitlines()[-1].startswith(f"{REASON_PREFIX}exit 2, permanent: rank 0 exited 2")


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_a_worker_exit_that_a_restart_may_cure_still_gets_the_restarts(tmp_path: Path) -> None:
    result = launch_probe(tmp_path / "marks", EXIT_PERMANENT)
    assert result.returncode == EXIT_PERMANENT, result.stderr
    assert len(list((tmp_path / "marks").glob("started.*"))) == MAX_RESTARTS + 1


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_full_checkpoint_storage_ends_the_run_without_a_restart_and_the_launcher_exits_3(tmp_path: Path) -> None:
    """The trainer through the launcher as in the pods, on storage too small for one checkpoint
    (trainer/base/faults.py)."""
    args = with_flags(TINY, steps="2", checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every="1")
    run = run_trainer(
        args, tmp_path, torchrun=True, max_restarts=MAX_RESTARTS, launcher="trainer.launch", env={FAKE_DISK_ENV: "1000"}
    )
    assert run.returncode == EXIT_NO_SPACE, run.output
    assert run.output.count("the checkpoint of step 1 needs") == 1, run.output  # the workers started once, not 3 times
    assert "will restart worker group" not in run.output
    assert f"{REASON_PREFIX}exit 3 (checkpoint storage full), permanent: rank 0 exited 3" in run.output
