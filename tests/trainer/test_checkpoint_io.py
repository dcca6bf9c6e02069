"""Checkpoint I/O at scale: saves in the background resume exactly, a replicated mesh reads each byte of a checkpoint
once, and the metrics say what a save and a load cost (time and bytes)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.harness.trainer_runs import TINY, TrainerRun, assert_same_losses, run_trainer, with_flags
from trainer.base.checkpoint.space import directory_bytes
from trainer.checkpoint.layout import complete_checkpoints

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def steps_from(run: TrainerRun, first: int) -> dict[int, float]:
    return {step: loss for step, loss in run.losses().items() if step >= first}


def test_background_saves_resume_exactly(reference_run: TrainerRun, tmp_path: Path) -> None:
    """Each background save is a snapshot of its step, whatever the steps after it change while it is written."""
    directory = tmp_path / "ckpt"
    args = [*with_flags(TINY, checkpoint_dir=str(directory), checkpoint_every="2", keep_checkpoints="2"),
            "--async-checkpoint", "--checkpoint-threads", "2"]  # fmt: skip
    first = run_trainer(args, tmp_path, nproc=2)
    assert first.returncode == 0, first.output
    assert [step for step, _ in complete_checkpoints(directory)] == [4, 6]
    assert_same_losses(first.losses(), reference_run.losses())
    shutil.rmtree(directory / "step_00000006")
    resumed = run_trainer(args, tmp_path, nproc=2)
    assert resumed.returncode == 0, resumed.output
    assert "resumed from" in resumed.output and [r["step"] for r in resumed.metrics] == [5, 6]
    assert_same_losses(resumed.losses(), steps_from(reference_run, 5))


def test_a_replicated_mesh_reads_the_checkpoint_once(reference_run: TrainerRun, tmp_path: Path) -> None:
    """HYBRID_SHARD 2 x 1: two replicas of every shard; the first replica reads, then broadcasts to the second."""
    directory = tmp_path / "ckpt"
    args = with_flags(
        TINY, checkpoint_dir=str(directory), checkpoint_every="3", sharding_strategy="HYBRID_SHARD",
        replicate_groups="2",
    )  # fmt: skip
    killed = run_trainer(args, tmp_path, nproc=2, fault="kill_after_step:3")
    assert killed.returncode != 0
    ((_, checkpoint),) = complete_checkpoints(directory)
    resumed = run_trainer(args, tmp_path, nproc=2)
    assert resumed.returncode == 0, resumed.output
    assert_same_losses({**killed.losses(), **resumed.losses()}, reference_run.losses())
    read = resumed.metrics[0]["checkpoint_read_bytes"]
    on_disk = directory_bytes(checkpoint)
    assert 0.8 * on_disk < read < 1.2 * on_disk, (read, on_disk)  # twice that if both replicas read


def test_the_metrics_carry_the_cost_of_saves_and_loads(tmp_path: Path) -> None:
    directory = tmp_path / "ckpt"
    args = with_flags(TINY, steps="4", checkpoint_dir=str(directory), checkpoint_every="2", log_every="1")
    first = run_trainer(args, tmp_path)
    assert first.returncode == 0, first.output
    by_step = {r["step"]: r for r in first.metrics}
    assert by_step[2]["checkpoint_save_s"] is None  # logged before step 2's save
    after_save = by_step[3]
    on_disk = directory_bytes(directory / "step_00000002")
    assert 0.8 * on_disk < after_save["checkpoint_bytes"] < 1.2 * on_disk
    assert 0 < after_save["checkpoint_blocked_s"] <= after_save["checkpoint_save_s"]
    assert after_save["checkpoint_load_s"] is None and after_save["peak_reserved_bytes"] is None  # CPU: no allocator
    shutil.rmtree(directory / "step_00000004")
    resumed = run_trainer(args, tmp_path)
    assert resumed.returncode == 0, resumed.output
    assert resumed.metrics[0]["checkpoint_load_s"] > 0
    assert 0.8 * on_disk < resumed.metrics[0]["checkpoint_read_bytes"] < 1.2 * on_disk
