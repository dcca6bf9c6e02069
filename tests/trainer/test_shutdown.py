"""SIGTERM (a pod being stopped) ends the run cleanly: every rank stops at the same step, the checkpoint being
written in the background is finished and committed, and the run resumes from it exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.trainer.runs import TINY, TrainerRun, assert_same_losses, run_trainer, with_flags
from trainer.checkpoint_layout import complete_checkpoints
from trainer.main import EXIT_TERMINATED

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def background_saves(tmp_path: Path) -> list[str]:
    args = with_flags(TINY, checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every="2")
    return [*args, "--async-checkpoint"]


def test_sigterm_to_one_rank_stops_every_rank_at_the_same_step(reference_run: TrainerRun, tmp_path: Path) -> None:
    """Rank 1 alone is signalled after step 3; both ranks learn it a step later and stop after step 4, with step
    4's background save committed. Without the agreement rank 0 would wait in step 4's collectives for a peer that
    left, until the training timeout."""
    stopped = run_trainer(background_saves(tmp_path), tmp_path, nproc=2, fault="sigterm_after_step:3@1")
    assert stopped.returncode != 0
    assert stopped.output.count("stopped after step 4 (SIGTERM)") == 2  # a warning: every rank logs it
    assert f"exitcode  : {EXIT_TERMINATED}" in stopped.output
    assert [record["step"] for record in stopped.metrics] == [1, 2, 3, 4]
    assert [step for step, _ in complete_checkpoints(tmp_path / "ckpt")] == [2, 4]
    assert not list((tmp_path / "ckpt").glob("*.tmp"))

    resumed = run_trainer(background_saves(tmp_path), tmp_path, nproc=2)
    assert resumed.returncode == 0, resumed.output
    assert [record["step"] for record in resumed.metrics] == [5, 6]
    assert_same_losses({**stopped.losses(), **resumed.losses()}, reference_run.losses())


def test_a_stopped_process_exits_with_the_status_of_sigterm(tmp_path: Path) -> None:
    run = run_trainer(background_saves(tmp_path), tmp_path, fault="sigterm_after_step:1")
    assert run.returncode == EXIT_TERMINATED, run.output
    assert "stopped after step 2 (SIGTERM)" in run.output
    assert [step for step, _ in complete_checkpoints(tmp_path / "ckpt")] == [2]
