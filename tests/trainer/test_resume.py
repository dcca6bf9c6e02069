"""Checkpoints: a killed run resumes exactly where the last checkpoint left it, at any world size, and a crash
in the middle of a save leaves the previous checkpoint usable."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.trainer_runs import TINY, TrainerRun, assert_same_losses, run_trainer, with_flags
from trainer.checkpoint.layout import complete_checkpoints, read_meta

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def checkpointed(tmp_path: Path, every: int, keep: int = 3) -> list[str]:
    return with_flags(
        TINY, checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every=str(every), keep_checkpoints=str(keep)
    )


def steps_from(run: TrainerRun, first: int) -> dict[int, float]:
    return {step: loss for step, loss in run.losses().items() if step >= first}


def test_torchrun_restarts_a_killed_run_and_the_loss_curve_continues(reference_run: TrainerRun, tmp_path: Path) -> None:
    """Both workers are SIGKILLed after step 3 (checkpoint at step 2); torchrun restarts them once."""
    run = run_trainer(checkpointed(tmp_path, every=2), tmp_path, nproc=2, fault="kill_after_step:3", max_restarts=1)
    assert run.returncode == 0, run.output
    first_attempt = [r["step"] for r in run.metrics if r["restarts"] == 0]
    second_attempt = [r["step"] for r in run.metrics if r["restarts"] == 1]
    assert first_attempt == [1, 2, 3]
    assert second_attempt == [3, 4, 5, 6]  # resumed after step 2, the last checkpoint
    assert_same_losses(run.losses(), reference_run.losses())
    assert "resumed from" in run.output


def test_resume_with_a_different_world_size(reference_run: TrainerRun, tmp_path: Path) -> None:
    """Checkpoint written by 2 ranks (FULL_SHARD), resumed by 1 process: DCP reshards model and optimizer."""
    args = checkpointed(tmp_path, every=3)
    killed = run_trainer(args, tmp_path, nproc=2, fault="kill_after_step:3")
    assert killed.returncode != 0
    assert [step for step, _ in complete_checkpoints(tmp_path / "ckpt")] == [3]
    resumed = run_trainer(args, tmp_path)
    assert resumed.returncode == 0, resumed.output
    assert [r["step"] for r in resumed.metrics] == [4, 5, 6]
    assert {r["world_size"] for r in resumed.metrics} == {1}
    assert_same_losses({**killed.losses(), **resumed.losses()}, reference_run.losses())


def test_a_crash_during_a_save_leaves_the_previous_checkpoint_usable(reference_run: TrainerRun, tmp_path: Path) -> None:
    args = checkpointed(tmp_path, every=2, keep=2)
    crashed = run_trainer(args, tmp_path, nproc=2, fault="kill_during_save:4")
    assert crashed.returncode != 0
    directory = tmp_path / "ckpt"
    partial = directory / "step_00000004.tmp"
    assert partial.is_dir() and any(partial.glob("*.distcp")) and not (partial / "meta.json").exists()
    assert [step for step, _ in complete_checkpoints(directory)] == [2]

    resumed = run_trainer(with_flags(args, sharding_strategy="SHARD_GRAD_OP"), tmp_path, nproc=2)
    assert resumed.returncode == 0, resumed.output
    assert_same_losses(steps_from(resumed, 3), steps_from(reference_run, 3))
    assert [step for step, _ in complete_checkpoints(directory)] == [4, 6]  # --keep-checkpoints 2
    assert not list(directory.glob("*.tmp"))
    meta = read_meta(directory / "step_00000006")
    assert (meta["step"], meta["consumed_samples"], meta["world_size"]) == (6, 48, 2)
