"""A checkpoint that will not fit is found out before the save, never by ENOSPC halfway through it: the space a save
needs is checked first, what the save would delete anyway goes first when that is what fits, and otherwise the run
stops with the numbers. The small file system is simulated (TRAINER_FAKE_DISK_BYTES, trainer/base/faults.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.trainer_runs import TINY, TrainerRun, run_trainer, with_flags
from trainer.base.checkpoint.space import Existing, directory_bytes, format_bytes, plan_space
from trainer.base.faults import FAKE_DISK_ENV
from trainer.base.pod.exits import EXIT_NO_SPACE
from trainer.checkpoint.layout import complete_checkpoints

MIB = 2**20


def checkpoints(directory: Path, *steps: int, size: int = 10 * MIB) -> list[Existing]:
    return [Existing(directory / f"step_{s:08d}", size, True, s) for s in steps]


def test_a_checkpoint_that_fits_deletes_nothing(tmp_path: Path) -> None:
    plan = plan_space(10 * MIB, 25 * MIB, checkpoints(tmp_path, 1, 2), keep=3)
    assert plan.fits and plan.prune_first == []


def test_what_the_save_would_delete_anyway_goes_first_when_that_fits(tmp_path: Path) -> None:
    stale = Existing(tmp_path / "step_00000004.tmp", 3 * MIB, False)
    plan = plan_space(10 * MIB, 5 * MIB, [*checkpoints(tmp_path, 1, 2, 3), stale], keep=2)
    assert plan.fits
    assert plan.prune_first == [stale.path, tmp_path / "step_00000001", tmp_path / "step_00000002"]


def test_the_newest_checkpoint_is_never_deleted_before_a_save(tmp_path: Path) -> None:
    """keep 1 would delete it after the save; before, a crash during the save would leave nothing to resume."""
    plan = plan_space(10 * MIB, 5 * MIB, checkpoints(tmp_path, 7), keep=1)
    assert not plan.fits and plan.prune_first == []


def test_the_refusal_names_what_a_checkpoint_needs_what_is_free_and_what_keep_needs(tmp_path: Path) -> None:
    plan = plan_space(771 * 2**30, 429 * 2**30, checkpoints(tmp_path, 100, size=771 * 2**30), keep=3)
    message = plan.problem(tmp_path, 200)
    assert "the checkpoint of step 200 needs 771.0 GiB but only 429.0 GiB is free" in message
    assert "--keep-checkpoints 3 of 771.0 GiB each needs 3084.0 GiB while a save is written" in message
    assert "fsdp-eks:storage.fsxCapacityGiB" in message


def test_sizes_read_as_df_prints_them() -> None:
    assert [format_bytes(n) for n in (512, 1536, 5 * MIB, 3 * 2**40)] == ["512 B", "1.5 KiB", "5.0 MiB", "3072.0 GiB"]


@pytest.fixture(scope="module")
def checkpoint_size(tmp_path_factory: pytest.TempPathFactory) -> int:
    """Bytes one checkpoint of the tiny preset takes on this file system."""
    directory = tmp_path_factory.mktemp("size") / "ckpt"
    run = run_trainer(with_flags(TINY, steps="1", warmup_steps="0", checkpoint_dir=str(directory)), directory.parent)
    assert run.returncode == 0, run.output
    ((_, path),) = complete_checkpoints(directory)
    return directory_bytes(path)


def run_on_small_disk(tmp_path: Path, disk_bytes: int, nproc: int = 1, steps: int = 4) -> TrainerRun:
    args = with_flags(
        TINY, steps=str(steps), checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every="1", keep_checkpoints="2"
    )
    return run_trainer(args, tmp_path, nproc=nproc, env={FAKE_DISK_ENV: str(disk_bytes)})


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_full_disk_is_reported_before_the_save_with_the_numbers(checkpoint_size: int, tmp_path: Path) -> None:
    """Room for one checkpoint and a half: the second save cannot fit (keep 2 keeps the first) and is refused."""
    run = run_on_small_disk(tmp_path, int(1.5 * checkpoint_size), nproc=2)
    assert run.returncode != 0, run.output  # torchrun's own status; each worker's is EXIT_NO_SPACE
    assert "the checkpoint of step 2 needs" in run.output
    assert "is free, even after deleting what a save would delete anyway" in run.output
    assert "--keep-checkpoints 2 of" in run.output
    assert [step for step, _ in complete_checkpoints(tmp_path / "ckpt")] == [1]
    assert not list((tmp_path / "ckpt").glob("*.tmp"))  # refused before writing anything
    assert "No space left on device" not in run.output


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_what_the_save_deletes_anyway_is_deleted_first_when_that_fits(checkpoint_size: int, tmp_path: Path) -> None:
    """Room for two and a half: from the third save on, the oldest goes first (it would go after the save)."""
    run = run_on_small_disk(tmp_path, int(2.5 * checkpoint_size))
    assert run.returncode == 0, run.output
    assert "deleted step_00000001 before saving step 3" in run.output
    assert [step for step, _ in complete_checkpoints(tmp_path / "ckpt")] == [3, 4]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_disk_too_small_for_one_checkpoint_fails_before_training(checkpoint_size: int, tmp_path: Path) -> None:
    run = run_on_small_disk(tmp_path, checkpoint_size // 2)
    assert run.returncode == EXIT_NO_SPACE, run.output
    assert "the checkpoint of step 1 needs" in run.output
    assert not run.metrics and "step 1/" not in run.output
