"""The run's record in S3 beside its model (metrics, summary, chart under <artifacts-uri>/record/), against moto's
S3 in this process: written whole, a failure logged without stopping training, and the metrics taken back by a run
that carries on without its file system."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness.moto_in_process import moto_in_process
from trainer.record.archive import keep_record, record_uri, restore_metrics

BUCKET = "fsdp-eks-dev-artifacts-test"
RUN = f"s3://{BUCKET}/fsdp-eks/dev/run-1"
RECORDS = [
    {"step": 10, "loss": 3.0, "world_size": 2, "tokens_per_second": 900.0, "restarts": 0},
    {"step": 20, "loss": 2.0, "world_size": 2, "tokens_per_second": 1000.0, "restarts": 0},
]


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    from boto3.session import Session

    with moto_in_process(monkeypatch, tmp_path, "us-east-1"):
        client = Session(region_name="us-east-1").client("s3")
        client.create_bucket(Bucket=BUCKET)
        yield client


def metrics(path: Path, records: list[dict[str, Any]] = RECORDS) -> str:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return str(path)


def objects(s3: Any) -> dict[str, tuple[str, bytes]]:
    prefix = record_uri(RUN)
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix.key).get("Contents", [])
    found = {}
    for item in listed:
        answer = s3.get_object(Bucket=BUCKET, Key=item["Key"])
        found[item["Key"][len(prefix.key) :]] = (answer["ContentType"], answer["Body"].read())
    return found


def test_the_record_lands_beside_the_model_whole(s3: Any, tmp_path: Path) -> None:
    file = metrics(tmp_path / "metrics.jsonl")
    assert str(keep_record(file, RUN, 100)) == f"{RUN}/record/"
    found = objects(s3)
    assert sorted(found) == ["loss_and_throughput.svg", "metrics.jsonl", "summary.json"]
    assert found["metrics.jsonl"] == ("application/x-ndjson", Path(file).read_bytes())
    summary = json.loads(found["summary.json"][1])
    assert (summary["steps"], summary["total_steps"], summary["first_loss"], summary["final_loss"]) == (20, 100, 3, 2)
    assert found["loss_and_throughput.svg"][0] == "image/svg+xml"
    assert b"fsdp-eks/dev/run-1" in found["loss_and_throughput.svg"][1]  # the chart's title names the run


def test_no_metrics_yet_or_no_artifacts_uri_writes_nothing(s3: Any, tmp_path: Path) -> None:
    assert keep_record(str(tmp_path / "missing.jsonl"), RUN, 100) is None
    assert keep_record(metrics(tmp_path / "metrics.jsonl"), None, 100) is None
    assert objects(s3) == {}


def test_a_failed_upload_is_logged_and_training_goes_on(
    s3: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    missing = RUN.replace(BUCKET, "no-such-bucket-here")
    with caplog.at_level(logging.WARNING, logger="trainer.record.archive"):
        assert keep_record(metrics(tmp_path / "metrics.jsonl"), missing, 100) is None
    assert "the run's record was not written to S3 (training goes on)" in caplog.text and "NoSuchBucket" in caplog.text


def test_a_run_without_its_metrics_file_takes_the_records_back(s3: Any, tmp_path: Path) -> None:
    keep_record(metrics(tmp_path / "before.jsonl"), RUN, 100)
    after = tmp_path / "new-file-system" / "metrics.jsonl"
    assert restore_metrics(str(after), RUN)
    assert after.read_text() == (tmp_path / "before.jsonl").read_text()


def test_a_metrics_file_already_there_is_kept(s3: Any, tmp_path: Path) -> None:
    keep_record(metrics(tmp_path / "before.jsonl"), RUN, 100)
    own = metrics(tmp_path / "metrics.jsonl", RECORDS[:1])
    assert not restore_metrics(own, RUN)
    assert len(Path(own).read_text().splitlines()) == 1


def test_a_run_with_no_record_yet_starts_a_new_metrics_file(s3: Any, tmp_path: Path) -> None:
    assert not restore_metrics(str(tmp_path / "metrics.jsonl"), RUN)
    assert not (tmp_path / "metrics.jsonl").exists()
