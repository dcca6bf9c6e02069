"""What the local run shows while it runs: a line per logged step. The summary and the chart at the end are the run's
record's (trainer/record/summary.py, trainer/record/chart.py).

Everything comes from the leader's --metrics-file (one JSON object per logged step, trainer/base/metrics/figures.py),
the file Prometheus' figures are made of too. After an elastic restart the trainer logs again from the checkpoint it
resumed, so a step can appear twice; the later record is the one that counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trainer.base.metrics.file import Record, parse_records


class MetricsFollower:
    """Reads the records appended to a metrics file since the last call (the file may not exist yet), with the
    project's one reader of the file (trainer/base/metrics/file.py). A file deleted and written anew (the lost-storage
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
    val_loss = record.get("val_loss")  # only an evaluation's record carries one (trainer/record/reporting.py)
    return (
        f"step {record['step']:>5}/{total_steps} | loss {record['loss']:.4f}"
        f" | {record['tokens_per_second']:>9,.0f} tok/s | world size {record['world_size']}"
        f" | restarts {record['restarts']}"
        + ("" if val_loss is None else f" | val loss {val_loss:.4f} (ppl {record['val_perplexity']:.2f})")
    )


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
