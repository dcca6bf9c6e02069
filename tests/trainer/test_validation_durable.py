"""The last checkpoint on S3 after a restart: a run whose last S3 write was lost (that failure fails the run) and
that is started again trains no further, puts that checkpoint on S3, and keeps --keep-best's best there; also where
the last one is an early stop's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from local.s3 import LocalS3
from tests.harness.trainer_runs import TINY, run_trainer, with_flags
from trainer.checkpoint.s3_store import S3Checkpoints
from trainer.s3.uri import S3Uri

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ARTIFACTS = S3Uri("fsdp-eks-early-stop", "run")


@pytest.fixture
def s3() -> Iterator[LocalS3]:
    with LocalS3.start() as server:
        server.create_bucket(ARTIFACTS.bucket)
        yield server


def test_a_run_started_again_after_its_early_stop_puts_that_checkpoint_and_the_best_on_s3(
    s3: LocalS3, tmp_path: Path
) -> None:
    args = with_flags(
        [*TINY, "--val-split", "0.01", "--keep-best"],
        steps="40",
        lr="0.02",
        lr_schedule="constant",
        eval_every="1",
        early_stop_patience="1",
        checkpoint_dir=str(tmp_path / "ckpt"),
        keep_checkpoints="1",
        artifacts_uri=str(ARTIFACTS),
    )
    first = run_trainer(args, tmp_path, env=s3.client_environment())
    assert first.returncode == 0 and "early stop" in first.output, first.output
    stop, best = first.metrics[-1]["step"], first.metrics[-1]["best_val_step"]
    store = S3Checkpoints(ARTIFACTS.join("checkpoints"), s3.client())
    assert stop < 40 and [c.step for c in store.complete()] == [best, stop]

    # The stop's S3 write lost (its failure failed the run; the pod is started again).
    store.delete(store.complete()[-1].uri)
    again = run_trainer(args, tmp_path, env=s3.client_environment())
    assert again.returncode == 0, again.output
    assert "nothing left to train" in again.output
    assert [c.step for c in store.complete()] == [best, stop]  # the stop's written, the best not pruned


def test_a_run_started_again_after_its_last_step_puts_it_on_s3_and_keeps_the_best_there(
    s3: LocalS3, tmp_path: Path
) -> None:
    """The restart's write of the last step's checkpoint prunes S3 sparing the best, as the lost write would have."""
    args = with_flags(
        [*TINY, "--val-split", "0.01", "--keep-best"],
        steps="12",
        lr="0.05",  # the last evaluation is not the best (tests/trainer/test_validation_lora_best.py)
        lr_schedule="constant",
        lora_rank="4",
        eval_every="1",
        checkpoint_dir=str(tmp_path / "ckpt"),
        keep_checkpoints="1",
        artifacts_uri=str(ARTIFACTS),
    )
    first = run_trainer(args, tmp_path, env=s3.client_environment())
    assert first.returncode == 0, first.output
    best = first.metrics[-1]["best_val_step"]
    store = S3Checkpoints(ARTIFACTS.join("checkpoints"), s3.client())
    assert best < 12 and [c.step for c in store.complete()] == [best, 12]

    store.delete(store.complete()[-1].uri)  # the last step's S3 write lost; the pod started again
    again = run_trainer(args, tmp_path, env=s3.client_environment())
    assert again.returncode == 0, again.output
    assert [c.step for c in store.complete()] == [best, 12]
