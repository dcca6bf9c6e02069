"""The local run follows the trainer's metrics file with the project's one reader of it
(trainer/base/metrics/file.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from local.report import MetricsFollower
from trainer.base.metrics.figures import PREFLIGHT_FIELDS, append_record, preflight_failure_record
from trainer.base.metrics.file import MetricsFileError, read_records


def record(step: int) -> str:
    return json.dumps({"step": step, "world_size": 1, "tokens_per_second": 100.0 * step, "loss": 1.0 / step})


def test_the_follower_reads_what_the_report_reads_line_by_line(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    follower = MetricsFollower(path)
    assert follower.poll() == []  # no file yet
    path.write_text(record(1) + "\n" + record(2)[:10])  # the second line is still being written
    assert [r["step"] for r in follower.poll()] == [1]
    path.write_text(record(1) + "\n" + record(2) + "\n" + record(3) + "\n")
    assert [r["step"] for r in follower.poll()] == [2, 3]
    assert follower.records == read_records(path)


def test_a_bad_line_is_named_by_its_number_in_the_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    follower = MetricsFollower(path)
    path.write_text(record(1) + "\n" + record(2) + "\n")
    follower.poll()
    path.write_text(record(1) + "\n" + record(2) + "\n" + '{"step": 3}\n')
    with pytest.raises(MetricsFileError, match=r"metrics.jsonl:3: missing world_size, tokens_per_second"):
        follower.poll()


def test_a_file_deleted_and_written_anew_is_read_from_its_start(tmp_path: Path) -> None:
    """The lost-storage drill deletes the run's file system; the new cluster's trainer writes a new metrics file."""
    path = tmp_path / "metrics.jsonl"
    follower = MetricsFollower(path)
    path.write_text(record(1) + "\n" + record(2) + "\n")
    follower.poll()
    path.unlink()
    assert follower.poll() == []
    path.write_text(record(3) + "\n")
    assert [r["step"] for r in follower.poll()] == [3]
    assert [r["step"] for r in follower.records] == [1, 2, 3]


def test_a_start_the_preflight_ended_is_written_and_left_out_of_the_training_records(tmp_path: Path) -> None:
    """The failed start's record (trainer/base/metrics/figures.py) carries what every record does, and no reader of
    training figures sees it (its tokens_per_second 0 would drag a median)."""
    path = tmp_path / "runs" / "metrics.jsonl"
    failed = preflight_failure_record({"preflight_slowest_fraction": 0.2}, ["ip-10-0-0-7 (node 1)"], 4, 0)
    append_record(str(path), failed)
    path.write_text(path.read_text() + record(1) + "\n")
    (written, _) = [json.loads(line) for line in path.read_text().splitlines()]
    assert written["step"] == 0 and written["preflight_bad_nodes"] == ["ip-10-0-0-7 (node 1)"]
    assert written["preflight_slowest_fraction"] == 0.2 and set(PREFLIGHT_FIELDS) <= set(written)
    assert [r["step"] for r in read_records(path)] == [1]
    assert [r["step"] for r in MetricsFollower(path).poll()] == [1]
