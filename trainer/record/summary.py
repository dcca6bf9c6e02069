"""A run's summary from its metrics file: steps, first and last loss, median tokens/s, world sizes, restarts, the
held-out evaluations and what the export holds. The local run prints it; the run's record (trainer/record/archive.py)
keeps it in S3 beside the model.

After an elastic restart the trainer logs again from the checkpoint it resumed, so a step can appear twice; the later
record is the one that counts.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainer.base.metrics.file import Record
from trainer.checkpoint.layout import PROVENANCE_FILE


def latest_per_step(records: list[Record]) -> list[Record]:
    """One record per step, the last one written (a resumed run logs the steps after its checkpoint again)."""
    by_step = {record["step"]: record for record in records}
    return [by_step[step] for step in sorted(by_step)]


@dataclass(frozen=True)
class Summary:
    steps: int
    total_steps: int
    final_loss: float
    first_loss: float
    tokens_per_second: float  # median over logged intervals: the first one includes warm-up
    world_sizes: list[int]  # in the order they occurred
    worker_restarts: int  # starts of the workers after the first, agreed by every node, as the last record saw them
    evaluations: list[tuple[int, float, float]] = field(default_factory=list)
    """(step, validation loss, perplexity) of each evaluation of the held-out set (job.validation), in step order."""
    best_val_loss: float | None = None
    best_val_step: int | None = None
    """The trainer's best evaluation so far, as the last record has it (with --keep-best, the checkpoint kept and
    exported)."""
    export: dict[str, Any] | None = None
    """The export's provenance (trainer/train.py exported_weights): the step its weights are from, the last step,
    the best evaluation's, whether --keep-best chose it and whether training stopped early."""

    def lines(self) -> list[str]:
        sizes = " -> ".join(str(size) for size in self.world_sizes)
        return [
            f"steps:          {self.steps}/{self.total_steps}",
            f"loss:           {self.first_loss:.4f} -> {self.final_loss:.4f}",
            *self.validation_lines(),
            f"tokens/s:       {self.tokens_per_second:,.0f} (median of the logged intervals)",
            f"world size:     {sizes}",
            f"worker restarts: {self.worker_restarts}",
        ]

    def validation_lines(self) -> list[str]:
        return self.best_line() + export_lines(self.export)

    def best_line(self) -> list[str]:
        if self.best_val_loss is None or self.best_val_step is None:
            return []
        # The best evaluation's own record has its perplexity; a metrics file begun after it (a new cluster's) not.
        ppl = next((f" (ppl {p:.2f})" for step, _, p in self.evaluations if step == self.best_val_step), "")
        count = len(self.evaluations)
        last = f"; last {self.evaluations[-1][1]:.4f} at step {self.evaluations[-1][0]}" if self.evaluations else ""
        return [
            f"val loss:       best {self.best_val_loss:.4f}{ppl} at step {self.best_val_step}{last} ({count} "
            f"evaluation{'s' * (count != 1)} logged)"
        ]


def export_lines(provenance: dict[str, Any] | None) -> list[str]:
    """Which step the export holds and whether training stopped early, from its provenance (a run with a held-out
    set writes one; the metrics file cannot tell: an early stop's last record looks like any other)."""
    if provenance is None:
        return []
    step, last, best = provenance["step"], provenance["last_step"], provenance["best_val_step"]
    if step != last:
        held = f"the best evaluation's weights, step {step} (--keep-best; the last step {last})"
    else:
        held = f"the last step's weights, step {step}" + (", also the best evaluation" if best == step else "")
    stopped = [f"stopped early:  at step {last} (--early-stop-patience)"] if provenance["stopped_early"] else []
    return [f"export holds:   {held}", *stopped]


def read_provenance(export_dir: str | None) -> dict[str, Any] | None:
    """The provenance file the trainer wrote into its --export-hf directory, if it exported one."""
    path = Path(export_dir) / PROVENANCE_FILE if export_dir else None
    return json.loads(path.read_text()) if path and path.is_file() else None


def evaluated(steps: list[Record]) -> list[tuple[int, float, float]]:
    """(step, val_loss, val_perplexity) of the records of an evaluation of the held-out set: only those carry a
    val_loss (trainer/record/reporting.py validation_figures)."""
    return [(r["step"], r["val_loss"], r["val_perplexity"]) for r in steps if r.get("val_loss") is not None]


def summarize(records: list[Record], total_steps: int, export_dir: str | None = None) -> Summary | None:
    steps = latest_per_step(records)
    if not steps:
        return None
    sizes: list[int] = []
    for record in records:  # in the order written, to show a shrink after a lost agent
        if not sizes or sizes[-1] != record["world_size"]:
            sizes.append(record["world_size"])
    return Summary(
        steps=steps[-1]["step"],
        total_steps=total_steps,
        final_loss=steps[-1]["loss"],
        first_loss=steps[0]["loss"],
        tokens_per_second=statistics.median(record["tokens_per_second"] for record in steps),
        world_sizes=sizes,
        worker_restarts=records[-1]["restarts"],
        evaluations=evaluated(steps),
        best_val_loss=records[-1].get("best_val_loss"),
        best_val_step=records[-1].get("best_val_step"),
        export=read_provenance(export_dir),
    )


def loss_series(steps: list[Record]) -> dict[str, tuple[list[int], list[float]]]:
    """The loss chart's lines, (steps, losses) each: the training loss of every logged step and, with a held-out set,
    the validation loss of every evaluation."""
    series = {"training": ([record["step"] for record in steps], [record["loss"] for record in steps])}
    evaluations = evaluated(steps)
    if evaluations:
        series["validation"] = ([step for step, _, _ in evaluations], [loss for _, loss, _ in evaluations])
    return series


def summary_json(summary: Summary) -> str:
    """The summary as the run's record keeps it: its fields, and the lines the local run prints."""
    return json.dumps({**asdict(summary), "lines": summary.lines()}, indent=2) + "\n"
