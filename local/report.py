"""What the local run shows: a line per logged step while it runs, then a summary and a chart.

Everything comes from the leader's --metrics-file (one JSON object per logged step, trainer/metrics.py), the file
Prometheus' figures are made of too. After an elastic restart the trainer logs again from the checkpoint it
resumed, so a step can appear twice; the later record is the one that counts.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass
from pathlib import Path

from sizing.metrics_file import Record, parse_records


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
    return (
        f"step {record['step']:>5}/{total_steps} | loss {record['loss']:.4f}"
        f" | {record['tokens_per_second']:>9,.0f} tok/s | world size {record['world_size']}"
        f" | restarts {record['restarts']}"
    )


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

    def lines(self) -> list[str]:
        sizes = " -> ".join(str(size) for size in self.world_sizes)
        return [
            f"steps:          {self.steps}/{self.total_steps}",
            f"loss:           {self.first_loss:.4f} -> {self.final_loss:.4f}",
            f"tokens/s:       {self.tokens_per_second:,.0f} (median of the logged intervals)",
            f"world size:     {sizes}",
            f"worker restarts: {self.worker_restarts}",
        ]


def summarize(records: list[Record], total_steps: int) -> Summary | None:
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
    )


def write_chart(records: list[Record], path: Path, title: str) -> Path:
    """Loss and tokens/s per logged step, as a PNG; a change of world size is marked on both."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed; must be chosen before pyplot is imported
    import matplotlib.pyplot as plt

    steps = latest_per_step(records)
    x = [record["step"] for record in steps]
    figure, (loss_axis, speed_axis) = plt.subplots(2, 1, sharex=True, figsize=(8, 6))
    loss_axis.plot(x, [record["loss"] for record in steps], marker=".")
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
