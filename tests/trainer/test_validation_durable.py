"""--keep-best's checkpoint in S3 and in the export: a run whose last S3 write was lost (that failure fails the run)
and that is started again trains no further, puts that checkpoint on S3 and keeps the best there, also where the last
one is an early stop's; under LoRA the best's adapters are what is exported, merged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from local.s3 import LocalS3
from tests.harness.trainer_runs import TINY, run_trainer, with_flags
from tests.trainer.test_validation_runs import early_stop_flags, evaluations, exported_model_loss, held_out_set
from trainer.base.s3.uri import S3Uri
from trainer.checkpoint.export import PROVENANCE_FILE
from trainer.checkpoint.s3_store import S3Checkpoints

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
    args = early_stop_flags([*TINY, "--val-split", "0.01", "--keep-best"], tmp_path, artifacts_uri=str(ARTIFACTS))
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


def test_a_lora_run_exports_its_best_and_started_again_after_its_last_step_keeps_the_best_on_s3(
    s3: LocalS3, tmp_path: Path
) -> None:
    """Under LoRA the adapter-only checkpoint of the best evaluation, loaded back and merged, is what --export-hf
    exports (the best is not the last step's, so a load that left the last adapters in place fails). Started again
    after its last step's S3 write was lost, the run writes it and prunes S3 sparing the best, as that write would."""
    export = tmp_path / "export"
    args = with_flags(
        [*TINY, "--val-split", "0.01", "--keep-best"],
        steps="12",
        lr="0.05",  # high enough that the last evaluation is not the best (seed 7: the best is step 11)
        lr_schedule="constant",
        lora_rank="4",
        eval_every="1",
        checkpoint_dir=str(tmp_path / "ckpt"),
        keep_checkpoints="1",
        artifacts_uri=str(ARTIFACTS),
        export_hf=str(export),
        export_dtype="fp32",
    )
    first = run_trainer(args, tmp_path, env=s3.client_environment())
    assert first.returncode == 0, first.output
    losses = evaluations(first)
    best = first.metrics[-1]["best_val_step"]
    assert best == min(losses, key=losses.__getitem__) and best < 12, losses  # else change the seed or the rate
    assert json.loads((export / PROVENANCE_FILE).read_text())["step"] == best
    assert exported_model_loss(export, held_out_set(args)) == pytest.approx(losses[best], rel=1e-5)
    store = S3Checkpoints(ARTIFACTS.join("checkpoints"), s3.client())
    assert [c.step for c in store.complete()] == [best, 12]

    store.delete(store.complete()[-1].uri)  # the last step's S3 write lost; the pod started again
    again = run_trainer(args, tmp_path, env=s3.client_environment())
    assert again.returncode == 0, again.output
    assert [c.step for c in store.complete()] == [best, 12]
