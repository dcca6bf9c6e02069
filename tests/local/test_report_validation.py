"""The local run's report of a job with a held-out set (job.validation): the chart plots the validation loss of each
evaluation beside the training loss, and the summary names the best validation loss and its step, all read from the
metrics file as the trainer writes it (an evaluation's record carries val_loss; best_val_* every record after one)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from local.report import progress_line
from trainer.base.metrics.file import read_records
from trainer.checkpoint.layout import PROVENANCE_FILE
from trainer.record.chart import write_chart
from trainer.record.summary import loss_series, summarize

SVG = "{http://www.w3.org/2000/svg}"
# (step, training loss, validation loss at that step or None)
RUN = [(10, 3.0, None), (20, 2.5, 2.8), (30, 2.2, None), (40, 2.0, 2.6), (50, 1.8, None), (60, 1.6, 2.7)]


def write_metrics(path: Path, run: list[tuple[int, float, float | None]]) -> Path:
    best: tuple[float, int] | None = None
    lines = []
    for step, loss, val_loss in run:
        if val_loss is not None and (best is None or val_loss < best[0]):
            best = (val_loss, step)
        record: dict[str, Any] = {
            "step": step,
            "loss": loss,
            "world_size": 2,
            "tokens_per_second": 1000.0,
            "restarts": 0,
            "val_loss": val_loss,
            "val_perplexity": None if val_loss is None else math.exp(val_loss),
            "best_val_loss": best[0] if best else None,
            "best_val_step": best[1] if best else None,
        }
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_loss_chart_plots_the_training_loss_and_each_evaluations_validation_loss(tmp_path: Path) -> None:
    records = read_records(write_metrics(tmp_path / "metrics.jsonl", RUN))
    series = loss_series(records)
    assert series["training"] == ([10, 20, 30, 40, 50, 60], [3.0, 2.5, 2.2, 2.0, 1.8, 1.6])
    assert series["validation"] == ([20, 40, 60], [2.8, 2.6, 2.7])
    chart = ElementTree.parse(write_chart(records, tmp_path / "chart.svg", "validation")).getroot()
    lines = {line.get("class"): line.get("points", "").split() for line in chart.iter(f"{SVG}polyline")}
    assert [len(lines["training"]), len(lines["validation"])] == [6, 3]
    assert [star.get("class") for star in chart.iter(f"{SVG}text") if star.text == "\u2605"] == ["best"]


def test_without_a_held_out_set_the_chart_has_the_training_loss_only(tmp_path: Path) -> None:
    records = read_records(write_metrics(tmp_path / "metrics.jsonl", [(s, loss, None) for s, loss, _ in RUN]))
    assert list(loss_series(records)) == ["training"]
    summary = summarize(records, 60)
    assert summary is not None and not any(line.startswith("val loss") for line in summary.lines())


def test_the_summary_names_the_best_validation_loss_and_its_step(tmp_path: Path) -> None:
    records = read_records(write_metrics(tmp_path / "metrics.jsonl", RUN))
    summary = summarize(records, 60)
    assert summary is not None and (summary.best_val_loss, summary.best_val_step) == (2.6, 40)
    [line] = [line for line in summary.lines() if line.startswith("val loss")]
    assert line == (
        f"val loss:       best 2.6000 (ppl {math.exp(2.6):.2f}) at step 40; last 2.7000 at step 60 (3 evaluations "
        "logged)"
    )


def test_an_evaluations_progress_line_shows_its_validation_loss(tmp_path: Path) -> None:
    records = read_records(write_metrics(tmp_path / "metrics.jsonl", RUN))
    assert progress_line(records[1], 60).endswith(f"| val loss 2.8000 (ppl {math.exp(2.8):.2f})")
    assert "val loss" not in progress_line(records[2], 60)


def write_provenance(directory: Path, **fields: Any) -> str:
    """The provenance file as trainer/train.py exported_weights has export_hf write it."""
    directory.mkdir()
    (directory / PROVENANCE_FILE).write_text(json.dumps({"best_val_loss": 2.6, "kept_best": True, **fields}))
    return str(directory)


def test_the_summary_says_which_step_the_export_holds_and_that_training_stopped_early(tmp_path: Path) -> None:
    records = read_records(write_metrics(tmp_path / "metrics.jsonl", RUN))
    best = write_provenance(tmp_path / "best", step=40, last_step=60, best_val_step=40, stopped_early=True)
    summary = summarize(records, 100, best)
    assert summary is not None and summary.lines()[3:5] == [
        "export holds:   the best evaluation's weights, step 40 (--keep-best; the last step 60)",
        "stopped early:  at step 60 (--early-stop-patience)",
    ]
    last = write_provenance(tmp_path / "last", step=60, last_step=60, best_val_step=40, stopped_early=False)
    summary = summarize(records, 60, last)
    assert summary is not None
    assert [line for line in summary.lines() if line.startswith(("export", "stopped"))] == [
        "export holds:   the last step's weights, step 60"
    ]
    no_export = summarize(records, 60, str(tmp_path / "none"))
    assert no_export is not None and not any(line.startswith("export") for line in no_export.lines())
