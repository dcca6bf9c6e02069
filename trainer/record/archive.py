"""The run's record in S3, beside its model: the metrics file, the summary and the chart, under
`<--artifacts-uri>/record/`, so that `pulumi destroy`, which deletes the file system the metrics are written to and
Prometheus' volume, loses no record of the run.

    aws s3 cp --recursive s3://<bucket>/<prefix>/<stack>/run-<n>/record/ ./record

Rank 0 writes it at every checkpoint (a run that fails later keeps its record up to there) and after the export (the
summary then says what the export holds). A failed upload is logged and training goes on: the model is what the run
is for, and the next checkpoint writes the record again. A run that carries on without its metrics file (a stack
destroyed and brought up again, its file system new) first takes the record's metrics back, so its record still
holds every step.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from trainer.base.metrics.file import MetricsFileError, read_records
from trainer.base.s3.run_layout import RECORD_DIRECTORY
from trainer.base.s3.transfer import S3Error, client, s3_error
from trainer.base.s3.uri import S3Uri
from trainer.record.chart import CHART_FILE, svg_chart
from trainer.record.summary import summarize, summary_json

METRICS_FILE = "metrics.jsonl"
SUMMARY_FILE = "summary.json"
CONTENT_TYPES = {METRICS_FILE: "application/x-ndjson", SUMMARY_FILE: "application/json", CHART_FILE: "image/svg+xml"}

log = logging.getLogger(__name__)


def record_uri(artifacts_uri: str) -> S3Uri:
    """Where the run's record lands: `<artifacts-uri>/record/` (a prefix)."""
    record = S3Uri.parse(artifacts_uri, "--artifacts-uri").join(RECORD_DIRECTORY)
    return S3Uri(record.bucket, record.prefix)


def record_files(metrics_file: Path, total_steps: int, title: str, export_dir: str | None = None) -> dict[str, str]:
    """File name -> content: the metrics file as written, the summary, the chart; empty before the first record."""
    try:
        records = read_records(metrics_file)
    except MetricsFileError:
        return {}
    summary = summarize(records, total_steps, export_dir)
    files = {METRICS_FILE: metrics_file.read_text(), CHART_FILE: svg_chart(records, title)}
    return files | ({SUMMARY_FILE: summary_json(summary)} if summary else {})


def aws_call_errors() -> tuple[type[BaseException], ...]:
    from botocore.exceptions import BotoCoreError, ClientError

    return (ClientError, BotoCoreError)


def upload_record(files: dict[str, str], artifacts_uri: str, s3: Any = None) -> S3Uri:
    """Each file to record_uri; an S3Error (naming the object and AWS's error) if a call fails."""
    target = record_uri(artifacts_uri)
    s3 = s3 or client()
    for name, content in files.items():
        uri = target.join(name)
        try:  # once: botocore retries throttling itself, and a denial must not hold training up (no grant wait)
            s3.put_object(Bucket=uri.bucket, Key=uri.key, Body=content.encode(), ContentType=CONTENT_TYPES[name])
        except aws_call_errors() as error:
            raise s3_error(uri, error) from None
    return target


def keep_record(
    metrics_file: str | None, artifacts_uri: str | None, total_steps: int, export_dir: str | None = None
) -> S3Uri | None:
    """The record written to S3 when the run has both a metrics file and an artifacts URI, its chart titled with the
    run's key (`<prefix>/<stack>/run-<n>`); a failure logged."""
    if not metrics_file or not artifacts_uri:
        return None
    title = S3Uri.parse(artifacts_uri, "--artifacts-uri").key.strip("/")
    files = record_files(Path(metrics_file), total_steps, title, export_dir)
    if not files:
        return None
    try:
        return upload_record(files, artifacts_uri)
    except S3Error as error:
        log.warning("the run's record was not written to S3 (training goes on): %s", error)
        return None


def restore_metrics(metrics_file: str | None, artifacts_uri: str | None, s3: Any = None) -> bool:
    """Put the record's metrics back as the metrics file when the run has none yet and its record in S3 has them;
    whether it did. A failure to read them is logged: the run then starts a new metrics file."""
    if not metrics_file or not artifacts_uri or Path(metrics_file).exists():
        return False
    uri = record_uri(artifacts_uri).join(METRICS_FILE)
    s3 = s3 or client()
    try:
        text = s3.get_object(Bucket=uri.bucket, Key=uri.key)["Body"].read().decode()
    except aws_call_errors() as error:
        if s3_error(uri, error).code not in ("NoSuchKey", "404"):
            log.warning("the run's earlier metrics were not read from %s: %s", uri, s3_error(uri, error))
        return False
    Path(metrics_file).parent.mkdir(parents=True, exist_ok=True)
    Path(metrics_file).write_text(text)
    log.info("metrics of the run's earlier steps taken back from %s", uri)
    return True
