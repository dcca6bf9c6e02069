"""What the local run shows: a line per logged step while it runs, then a summary and a chart.

Everything comes from the leader's --metrics-file (one JSON object per logged step, trainer/metrics.py), the file
Prometheus' figures are made of too. After an elastic restart the trainer logs again from the checkpoint it
resumed, so a step can appear twice; the later record is the one that counts.
"""

from __future__ import annotations

import itertools
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sizing.metrics_file import Record, parse_records
from trainer.checkpoint.layout import PROVENANCE_FILE


class MetricsFollower:
    """Reads the records appended to a metrics file since the last call (the file may not exist yet), with the
    project's one reader of the file (sizing/metrics_file.py). A file deleted and written anew (the lost-storage
    drill's new cluster) is read from its start; the records read before stay."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.lines = 0
        self.inode: int | None = None
        self.records: list[Record] = []

    def poll(self) -> list[Record]:
        try:
            stat = self.path.stat()
        except OSError:
            return []
        # A new file may reuse the old one's inode number, but it starts shorter than what was read of the old one.
        if stat.st_ino != self.inode or stat.st_size < self.offset:
            self.inode, self.offset, self.lines = stat.st_ino, 0, 0
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            chunk = handle.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written waits for the next call
        self.offset += len(complete)
        text = complete.decode()
        new = parse_records(text, self.path, first_line=self.lines + 1)
        self.lines += text.count("\n")
        self.records += new
        return new


def progress_line(record: Record, total_steps: int) -> str:
    val_loss = record.get("val_loss")  # only an evaluation's record carries one (trainer/reporting.py)
    return (
        f"step {record['step']:>5}/{total_steps} | loss {record['loss']:.4f}"
        f" | {record['tokens_per_second']:>9,.0f} tok/s | world size {record['world_size']}"
        f" | restarts {record['restarts']}"
        + ("" if val_loss is None else f" | val loss {val_loss:.4f} (ppl {record['val_perplexity']:.2f})")
    )


def latest_per_step(records: list[Record]) -> list[Record]:
    """One record per step, the last one written (a resumed run logs the steps after its checkpoint again)."""
    by_step = {record["step"]: record for record in records}
    return [by_step[step] for step in sorted(by_step)]


@dataclass(frozen=True)
class Recovery:
    """A fault's cost in time: from the last step the leader logged before it to the first step a new start of the
    workers logged after it (the steps since the checkpoint are trained again on top)."""

    last_step: int
    first_step: int
    seconds: float

    def line(self) -> str:
        return (
            f"recovery: {self.seconds:.1f} s from step {self.last_step} (the last logged before the fault) to step "
            f"{self.first_step} (the first logged after it)"
        )


def recovery(records: list[Record], fired_at: float) -> Recovery | None:
    """The recovery from a fault injected at `fired_at` (time.time(), as the records' "time"); None when no step was
    logged before it, or none by a later start of the workers after it. A later start's records have another agreed
    start count ("restarts"), or count their tokens again from the step they resumed at ("tokens"): after etcd came
    back empty the start count itself begins again."""
    before = [record for record in records if record["time"] <= fired_at]
    if not before:
        return None
    last = before[-1]

    def later_start(record: Record) -> bool:
        return record["restarts"] != last["restarts"] or record["tokens"] < last["tokens"]

    after = [r for r in records if r["time"] > fired_at and later_start(r)]
    if not after:
        return None
    return Recovery(last["step"], after[0]["step"], after[0]["time"] - last["time"])


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
    val_loss (trainer/reporting.py validation_figures)."""
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


def write_chart(records: list[Record], path: Path, title: str) -> Path:
    """Loss (training, and validation at each evaluation with the best one starred) and tokens/s per logged step, as
    a PNG; a change of world size is marked on both."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed; must be chosen before pyplot is imported
    import matplotlib.pyplot as plt

    steps = latest_per_step(records)
    x = [record["step"] for record in steps]
    figure, (loss_axis, speed_axis) = plt.subplots(2, 1, sharex=True, figsize=(8, 6))
    for label, (xs, ys) in loss_series(steps).items():
        style = {"marker": "o", "color": "tab:orange"} if label == "validation" else {"marker": "."}
        loss_axis.plot(xs, ys, label=label, **style)
    best = records[-1].get("best_val_step"), records[-1].get("best_val_loss")
    if None not in best:
        loss_axis.plot(*best, marker="*", markersize=12, color="tab:red", linestyle="none", label="best validation")
    if len(loss_axis.get_lines()) > 1:
        loss_axis.legend(fontsize=8)
    loss_axis.set_ylabel("loss")
    loss_axis.set_title(title)
    speed_axis.plot(x, [record["tokens_per_second"] for record in steps], marker=".", color="tab:green")
    speed_axis.set_ylabel("tokens/s")
    speed_axis.set_xlabel("step")
    for before, after in itertools.pairwise(steps):
        if before["world_size"] != after["world_size"]:
            for axis in (loss_axis, speed_axis):
                axis.axvline(after["step"], color="tab:red", linestyle="--", linewidth=1)
            speed_axis.annotate(
                f"world size {after['world_size']}", (after["step"], after["tokens_per_second"]), fontsize=8
            )
    for axis in (loss_axis, speed_axis):
        axis.grid(alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
