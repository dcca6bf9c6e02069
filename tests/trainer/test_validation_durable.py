"""An early stop's checkpoint on S3: a run whose stop's S3 write was lost (that failure fails the run, as the last
step's does) and that is started again trains no further, puts that checkpoint on S3, and keeps the best one there."""

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
