"""The validation flags' checks, the held-out figures between evaluations (Prometheus keeps the last), and the S3
tier's retention that never prunes --keep-best's checkpoint."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from local.s3 import LocalS3
from tests.trainer.process_groups import DEFAULT_GROUP
from tests.trainer.test_metrics import free_port, sample_metrics
from tests.trainer.test_validate import errors_for
from trainer.base.flags.config import ArtifactsConfig
from trainer.base.metrics.figures import MetricsSink
from trainer.base.s3.uri import S3Uri
from trainer.checkpoint.durable import DurableTier
from trainer.checkpoint.layout import checkpoint_name
from trainer.checkpoint.s3_store import S3Checkpoints
from trainer.checkpoint.stats import CheckpointStats

BUCKET = "fsdp-eks-validation"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--val-split", "0.5"], "--val-split 0.5: must be at least 0 and below 0.5"),
        (["--val-split", "-0.1"], "--val-split -0.1: must be at least 0 and below 0.5"),
        (["--val-split", "0.1", "--val-dataset", "synthetic"], "--val-dataset synthetic: not with --val-split 0.1"),
        (["--val-dataset", "missing/val.jsonl"], "--val-dataset missing/val.jsonl: no such file"),
        (["--val-dataset", "s3://bucket/val.jsonl"], "--val-dataset s3://bucket/val.jsonl: needs --data-cache-dir"),
        (["--val-split", "0.1", "--eval-every", "-1"], "--eval-every -1: must not be negative"),
        (["--val-split", "0.1", "--early-stop-patience", "-2"], "--early-stop-patience -2: must not be negative"),
        (["--eval-every", "10"], "--eval-every 10: needs a held-out set: --val-split (such as 0.02) or --val-dataset"),
        (["--keep-best", "--checkpoint-dir", "/tmp/c"], "--keep-best: needs a held-out set"),
        (["--early-stop-patience", "3"], "--early-stop-patience 3: needs a held-out set"),
        (["--val-split", "0.1", "--early-stop-patience", "3"], "--early-stop-patience 3: needs --eval-every above 0"),
        (["--val-split", "0.1", "--keep-best"], "--keep-best: needs --checkpoint-dir"),
        (["--dataset", "synthetic", "--val-dataset", "synthetic"], "--val-dataset synthetic: is --dataset, read"),
        (
            ["--val-dataset", "synthetic", "--val-dataset-split", "train"],
            "--val-dataset synthetic: is --dataset, read in the same split (train): its records are trained on",
        ),
        (["--val-dataset-split", "validation"], "--val-dataset-split validation: needs --val-dataset"),
    ],
)
def test_validation_flags_are_refused_naming_the_flag(argv: list[str], expected: str) -> None:
    assert any(error.startswith(expected) for error in errors_for(argv)), errors_for(argv)


def test_a_validation_data_set_may_be_another_split_of_the_training_one() -> None:
    assert errors_for(["--dataset", "synthetic", "--val-dataset", "synthetic", "--val-dataset-split", "test"]) == []


def test_a_held_out_split_with_every_option_is_accepted(tmp_path: Path) -> None:
    flags = ["--val-split", "0.05", "--eval-every", "50", "--keep-best", "--early-stop-patience", "3"]
    assert errors_for([*flags, "--checkpoint-dir", str(tmp_path)]) == []


def test_prometheus_keeps_the_last_evaluation_between_evaluations_and_the_log_line_shows_it() -> None:
    port = free_port()
    sink = MetricsSink(None, port, "127.0.0.1")
    base = sample_metrics(step=10)
    evaluated = replace(base, val_loss=1.5, val_perplexity=4.4817, best_val_loss=1.5, best_val_step=10)
    try:
        sink.write(evaluated)
        sink.write(replace(base, step=11, best_val_loss=1.5, best_val_step=10))
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    finally:
        sink.close()
    gauges = {
        line.split(" ")[0]: float(line.split(" ")[1]) for line in body.splitlines() if line.startswith("trainer_")
    }
    assert gauges["trainer_step"] == 11
    assert (gauges["trainer_val_loss"], gauges["trainer_best_val_step"]) == (1.5, 10)
    assert "| val loss 1.5000 (ppl 4.48)" in evaluated.log_line(100)
    assert "val loss" not in base.log_line(100)


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalS3]:
    with LocalS3.start() as server:
        server.create_bucket(BUCKET)
        for name, value in server.client_environment().items():
            monkeypatch.setenv(name, value)
        yield server


@pytest.mark.usefixtures("world_of_one")
def test_the_s3_tier_keeps_the_best_checkpoint_when_it_prunes(s3: LocalS3) -> None:
    artifacts = ArtifactsConfig(uri=f"s3://{BUCKET}/run-1")
    tier = DurableTier(artifacts, 1, 1, 8, True, DEFAULT_GROUP, CheckpointStats())
    state = {"weights": torch.arange(4.0)}
    for step in (2, 4, 6, 8):
        upload = tier.upload(state, step, {"step": step}, 16, after=None, spared=4)
        assert upload.error is None, upload.error
    root = S3Uri(BUCKET, "run-1/checkpoints")
    assert [c.step for c in S3Checkpoints(root).complete()] == [4, 8]  # the newest, and the best
    # Without a spared step, the prune is the usual one: the newest alone.
    tier.upload(state, 10, {"step": 10}, 16, after=None)
    assert [c.step for c in S3Checkpoints(root).complete()] == [10]
    meta = s3.client().get_object(Bucket=BUCKET, Key=root.join(checkpoint_name(10), "meta.json").key)
    assert json.loads(meta["Body"].read()) == {"step": 10}
