"""Same seed, data and global batch: every step's loss matches between 1 and 2 processes and across sharding
strategies, activation checkpointing modes and meshes (fp32, gloo)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.harness.trainer_runs import TINY, TrainerRun, assert_same_losses, run_trainer, with_flags

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.mark.parametrize(
    "extra",
    [
        ["--sharding-strategy", "FULL_SHARD"],
        ["--sharding-strategy", "SHARD_GRAD_OP"],
        ["--sharding-strategy", "HYBRID_SHARD", "--replicate-groups", "2"],  # 2 x 1 mesh: replicate across ranks
        ["--sharding-strategy", "HYBRID_SHARD", "--replicate-groups", "1"],  # 1 x 2 mesh: shard across ranks
        ["--sharding-strategy", "NO_SHARD"],
        ["--sharding-strategy", "FULL_SHARD", "--activation-checkpointing", "selective"],
    ],
    ids=["full-shard", "shard-grad-op", "hybrid-2x1", "hybrid-1x2", "no-shard", "full-shard-selective-ac"],
)
def test_two_processes_match_one(extra: list[str], reference_run: TrainerRun, tmp_path: Path) -> None:
    run = run_trainer([*TINY, *extra], tmp_path, nproc=2)
    assert run.returncode == 0, run.output
    assert {record["world_size"] for record in run.metrics} == {2}
    assert_same_losses(run.losses(), reference_run.losses())


def test_full_activation_checkpointing_matches_none(reference_run: TrainerRun, tmp_path: Path) -> None:
    run = run_trainer([*TINY, "--activation-checkpointing", "full"], tmp_path)
    assert run.returncode == 0, run.output
    assert_same_losses(run.losses(), reference_run.losses())


def test_the_tiny_model_learns(reference_run: TrainerRun) -> None:
    losses = reference_run.losses()
    assert losses[6] < losses[1] - 0.05, losses


def test_a_different_seed_gives_a_different_run(reference_run: TrainerRun, tmp_path: Path) -> None:
    """Guards the comparisons above: they would pass vacuously if the seed or the data were ignored."""
    run = run_trainer(with_flags(TINY, seed="8", steps="1", warmup_steps="0"), tmp_path)
    assert run.returncode == 0, run.output
    assert abs(run.losses()[1] - reference_run.losses()[1]) > 1e-4


@pytest.mark.skipif(
    os.environ.get("TRAINER_TEST_COMPILE") != "1",
    reason="torch.compile on CPU takes about a minute on 2 cores; set TRAINER_TEST_COMPILE=1 to run it",
)
def test_compiled_layers_match_eager(reference_run: TrainerRun, tmp_path: Path) -> None:
    run = run_trainer([*TINY, "--compile"], tmp_path, timeout=280)
    assert run.returncode == 0, run.output
    assert_same_losses(run.losses(), reference_run.losses(), rel=1e-4)  # fused kernels round differently


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_reduced_precision_tracks_fp32(precision: str, reference_run: TrainerRun, tmp_path: Path) -> None:
    """bf16 / fp16 compute (fp16 with loss scaling) stays within 1% of the fp32 losses over the run."""
    run = run_trainer(with_flags(TINY, mixed_precision=precision), tmp_path)
    assert run.returncode == 0, run.output
    assert_same_losses(run.losses(), reference_run.losses(), rel=1e-2)
