"""SIGTERM (a pod being stopped) during a save: the save is finished and committed when its shards are written (or
are within --checkpoint-stop-wait-seconds), otherwise abandoned as a .tmp directory; the process then ends as SIGTERM
ends it, and the run resumes from the committed checkpoint exactly."""

from __future__ import annotations

import signal
from concurrent.futures import Future
from pathlib import Path

import pytest

from tests.trainer.runs import TINY, TrainerRun, assert_same_losses, run_trainer, with_flags
from trainer.checkpoint import Checkpointer, _Pending
from trainer.checkpoint_layout import complete_checkpoints
from trainer.config import CheckpointConfig
from trainer.env import DistEnv


def saving(tmp_path: Path, *extra: str) -> list[str]:
    return [*with_flags(TINY, checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every="2"), *extra]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigterm_during_a_background_save_commits_it(reference_run: TrainerRun, tmp_path: Path) -> None:
    """Both ranks are signalled while step 4's save is being written in the background: it is waited for and
    committed, and the run resumes from it on the uninterrupted run's loss curve."""
    args = saving(tmp_path, "--async-checkpoint")
    stopped = run_trainer(args, tmp_path, nproc=2, fault="sigterm_during_save:4")
    assert stopped.returncode != 0
    assert "Signal 15 (SIGTERM)" in stopped.output  # torchrun's report: the workers ended by SIGTERM
    assert [record["step"] for record in stopped.metrics] == [1, 2, 3, 4]
    assert [step for step, _ in complete_checkpoints(tmp_path / "ckpt")] == [2, 4]
    assert not list((tmp_path / "ckpt").glob("*.tmp"))

    resumed = run_trainer(args, tmp_path, nproc=2)
    assert resumed.returncode == 0, resumed.output
    assert [record["step"] for record in resumed.metrics] == [5, 6]
    assert_same_losses({**stopped.losses(), **resumed.losses()}, reference_run.losses())


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigterm_after_a_synchronous_write_commits_it_and_ends_as_sigterm_does(tmp_path: Path) -> None:
    run = run_trainer(saving(tmp_path), tmp_path, fault="sigterm_during_save:2")
    assert run.returncode == -signal.SIGTERM, run.output
    assert "SIGTERM: exiting" in run.output
    assert [step for step, _ in complete_checkpoints(tmp_path / "ckpt")] == [2]


def pending_save(tmp_path: Path, future: Future) -> Checkpointer:
    checkpointer = Checkpointer(CheckpointConfig(directory=str(tmp_path)), DistEnv(), "cpu", {}, io=None)
    tmp = tmp_path / "step_00000007.tmp"
    tmp.mkdir()
    checkpointer._pending = _Pending(7, 56, tmp, tmp_path / "step_00000007", 0.0, 0, future)
    return checkpointer


def test_a_save_still_writing_after_the_wait_is_abandoned(tmp_path: Path) -> None:
    assert pending_save(tmp_path, Future()).settle(wait_s=0.05) is False
    assert complete_checkpoints(tmp_path) == [] and (tmp_path / "step_00000007.tmp").is_dir()


def test_a_save_that_finishes_within_the_wait_is_committed(tmp_path: Path) -> None:
    done: Future = Future()
    done.set_result(None)
    assert pending_save(tmp_path, done).settle(wait_s=0.05) is True
    assert [step for step, _ in complete_checkpoints(tmp_path)] == [7]
