"""The scaling report: throughput and scaling efficiency of runs at different node counts, as a table and a chart.

    python -m sizing.scaling runs/p5-1.jsonl runs/p5-2.jsonl runs/p5-16.jsonl --gpus-per-node 8 --out report/
    python -m sizing.scaling local-1.jsonl local-2.jsonl --out report/        # local runs: 1 worker = 1 "node"

Input: the trainer's --metrics-file of each run (JSON lines, one object per logged step;
trainer/base/metrics/figures.py). Records are grouped by `world_size`, so one elastic run that changed size gives a
point per size. Per point, the first logged record of each run is left out when there are later ones (it carries
start-up: lazy allocations, compilation), and the median `tokens_per_second` of the rest is the point's throughput.
Scaling efficiency is per-GPU throughput against that of the smallest run: tokens/s(N) / N over tokens/s(base) / base.
Output in --out: scaling.md (the table), scaling.json (the same figures) and scaling.png (the chart).

The fabric: each record of a run whose trainer ran the fabric preflight (trainer/checks/fabric_preflight.py) carries
the bus bandwidth it measured within a node and on a rail across nodes (trainer/base/metrics/figures.py preflight_*).
The report shows them per point, and with --model and --instance it sets the throughput model's scaling efficiency
beside the measured one, computed on the measured links instead of the catalog's (sizing/throughput.py
MeasuredFabric), and says which it used:

    python -m sizing.scaling runs/p5-1.jsonl runs/p5-2.jsonl --gpus-per-node 8 --model llama2-7b \
        --instance p5.48xlarge --seq-len 4096 --out report/
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from sizing.catalog import InstanceType
from sizing.estimate import SizingError, make_job, resolve_instance, resolve_shape
from sizing.memory import Job
from sizing.throughput import Assumptions, MeasuredFabric, expected_fabric, scaling_efficiency
from trainer.base.flags.config import SHARDING_STRATEGIES, DataConfig, ParallelConfig, ScheduleConfig, TrainConfig
from trainer.base.metrics.file import MetricsFileError, read_records
from trainer.base.pod.exits import EXIT_BAD_INPUT
from trainer.base.units import GIB

# The metrics' preflight fields (trainer/base/metrics/figures.py METRIC_FIELDS) the model's links are read from.
INTRA_FIELDS = ("preflight_intra_all_gather_gb_per_s", "preflight_intra_reduce_scatter_gb_per_s")
INTER_FIELD = "preflight_inter_all_reduce_gb_per_s"


class ScalingError(ValueError):
    """A metrics file the report cannot use; the message names the file and what is wrong."""


@dataclass(frozen=True)
class ScalingPoint:
    world_size: int
    nodes: float
    tokens_per_second: float
    tokens_per_second_per_gpu: float
    speedup: float
    scaling_efficiency: float
    step_time_s: float
    mfu: float | None
    peak_memory_gib: float
    records: int
    """Logged records the point's median is taken over."""
    fabric: MeasuredFabric | None = None
    """What the fabric preflight measured at this size (the slowest node's; None: no preflight figures)."""
    modeled_efficiency: float | None = None
    """The throughput model's scaling efficiency for this size, on the measured links where `fabric` has them."""
    modeled_efficiency_catalog: float | None = None
    """The same on the catalog's links alone."""


def steady_records(records: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """One run's records by world size, without each size's first record when later ones exist."""
    by_size: dict[int, list[dict[str, Any]]] = {}
    for record in records:
        by_size.setdefault(int(record["world_size"]), []).append(record)
    return {size: group[1:] if len(group) > 1 else group for size, group in by_size.items()}


def measured_fabric(records: list[dict[str, Any]]) -> MeasuredFabric | None:
    """The fabric preflight's figures in `records` (the last record that has any): within a node the lower of the
    all-gather's and the reduce-scatter's; None when no record has them (a run without a preflight)."""
    for record in reversed(records):
        intra = [record[key] for key in INTRA_FIELDS if record.get(key) is not None]
        inter = record.get(INTER_FIELD)
        if intra or inter is not None:
            return MeasuredFabric(min(intra) if intra else None, inter)
    return None


@dataclass(frozen=True)
class ModelledJob:
    """What the throughput model needs besides the runs: the job's shape and the nodes' instance type."""

    job: Job
    instance: InstanceType


def modeled_efficiencies(
    model: ModelledJob, world_size: int, gpus_per_node: int, fabric: MeasuredFabric | None
) -> tuple[float | None, float | None]:
    """(on the measured links, on the catalog's) scaling efficiency of the model at `world_size` ranks; (None, None)
    when the ranks do not make whole nodes of the instance."""
    if world_size % gpus_per_node or gpus_per_node != model.instance.gpus:
        return None, None
    nodes = world_size // gpus_per_node
    catalog = scaling_efficiency(model.job, model.instance, nodes)
    measured = scaling_efficiency(model.job, model.instance, nodes, Assumptions(measured=fabric)) if fabric else None
    return measured, catalog


def with_model(points: list[ScalingPoint], model: ModelledJob, gpus_per_node: int) -> list[ScalingPoint]:
    """The points with the model's efficiencies beside the measured ones."""
    modelled = []
    for point in points:
        measured, catalog = modeled_efficiencies(model, point.world_size, gpus_per_node, point.fabric)
        modelled.append(replace(point, modeled_efficiency=measured, modeled_efficiency_catalog=catalog))
    return modelled


def scaling_points(runs: list[list[dict[str, Any]]], gpus_per_node: int = 1) -> list[ScalingPoint]:
    """Points sorted by world size, efficiency against the smallest."""
    merged: dict[int, list[dict[str, Any]]] = {}
    fabrics: dict[int, MeasuredFabric] = {}
    for records in runs:
        for size, group in steady_records(records).items():
            merged.setdefault(size, []).extend(group)
            fabric = measured_fabric(group)
            if fabric is not None:
                fabrics[size] = fabric
    if not merged:
        raise ScalingError("no runs given")
    base_size = min(merged)
    base_per_gpu = statistics.median(r["tokens_per_second"] for r in merged[base_size]) / base_size
    points = []
    for size in sorted(merged):
        group = merged[size]
        throughput = statistics.median(r["tokens_per_second"] for r in group)
        mfus = [r["mfu"] for r in group if r.get("mfu") is not None]
        points.append(
            ScalingPoint(
                world_size=size,
                nodes=size / gpus_per_node,
                tokens_per_second=throughput,
                tokens_per_second_per_gpu=throughput / size,
                speedup=throughput / (base_per_gpu * base_size),
                scaling_efficiency=throughput / size / base_per_gpu,
                step_time_s=statistics.median(r.get("step_time_s", 0.0) for r in group),
                mfu=statistics.median(mfus) if mfus else None,
                peak_memory_gib=max(r.get("peak_memory_bytes", 0) for r in group) / GIB,
                records=len(group),
                fabric=fabrics.get(size),
            )
        )
    return points


def fabric_table(points: list[ScalingPoint], instance: InstanceType | None) -> str:
    """The preflight's figures per point and the model's efficiency on them; '' when no point has either."""
    if not any(p.fabric or p.modeled_efficiency_catalog is not None for p in points):
        return ""

    def shown(value: float | None, unit: str = " GB/s") -> str:
        return "n/a" if value is None else f"{value:.1f}{unit}"

    def percent(value: float | None) -> str:
        return "n/a" if value is None else f"{100 * value:.1f}%"

    lines = [
        "| nodes | within a node (preflight) | per rail across nodes (preflight) | scaling efficiency | "
        "modeled, measured links | modeled, catalog links |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for p in points:
        fabric = p.fabric or MeasuredFabric()
        lines.append(
            f"| {p.nodes:g} | {shown(fabric.intra_gb_per_s)} | {shown(fabric.inter_rail_gb_per_s)} "
            f"| {percent(p.scaling_efficiency)} | {percent(p.modeled_efficiency)} "
            f"| {percent(p.modeled_efficiency_catalog)} |"
        )
    if instance is not None:
        expected = expected_fabric(instance)
        lines.append(
            f"\nThe model's links: the fabric preflight's bus bandwidth where a run's metrics hold it, instead of the "
            f"catalog's for {instance.name} ({shown(expected.intra_gb_per_s)} within a node, "
            f"{shown(expected.inter_rail_gb_per_s)} per rail); the catalog's where they do not."
        )
    return "\n".join(lines)


def markdown_table(points: list[ScalingPoint]) -> str:
    lines = [
        "| nodes | GPUs | tokens/s | tokens/s per GPU | speed-up | scaling efficiency | step time | MFU | peak mem |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in points:
        mfu = "n/a" if p.mfu is None else f"{100 * p.mfu:.1f}%"
        lines.append(
            f"| {p.nodes:g} | {p.world_size} | {p.tokens_per_second:,.0f} | {p.tokens_per_second_per_gpu:,.0f} "
            f"| {p.speedup:.2f}x | {100 * p.scaling_efficiency:.1f}% | {p.step_time_s:.3f} s | {mfu} "
            f"| {p.peak_memory_gib:.2f} GiB |"
        )
    return "\n".join(lines)


def write_chart(points: list[ScalingPoint], path: Path, title: str) -> None:
    """Bars of throughput against the ideal linear line, and the scaling efficiency on a second axis."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    labels = [f"{p.nodes:g}" for p in points]
    positions = list(range(len(points)))
    base = points[0]
    ideal = [base.tokens_per_second * p.world_size / base.world_size for p in points]
    figure, throughput_axis = plt.subplots(figsize=(8, 4.5), dpi=120)
    throughput_axis.bar(positions, [p.tokens_per_second for p in points], color="#4C72B0", label="measured tokens/s")
    throughput_axis.plot(positions, ideal, "k--", marker="_", label="linear scaling")
    throughput_axis.set_xticks(positions, labels)
    throughput_axis.set_xlabel("nodes")
    throughput_axis.set_ylabel("tokens per second")
    efficiency_axis = throughput_axis.twinx()
    efficiency = [100 * p.scaling_efficiency for p in points]
    efficiency_axis.plot(positions, efficiency, color="#DD8452", marker="o", label="scaling efficiency")
    for x, value in zip(positions, efficiency, strict=True):
        efficiency_axis.annotate(f"{value:.0f}%", (x, value), textcoords="offset points", xytext=(0, 6), ha="center")
    efficiency_axis.set_ylim(0, 125)
    efficiency_axis.set_ylabel("scaling efficiency (%)")
    handles = throughput_axis.get_legend_handles_labels()
    extra = efficiency_axis.get_legend_handles_labels()
    figure.legend(handles[0] + extra[0], handles[1] + extra[1], loc="lower center", ncol=3, frameon=False)
    throughput_axis.set_title(title)
    figure.tight_layout(rect=(0, 0.07, 1, 1))
    figure.savefig(path)
    plt.close(figure)


def write_report(points: list[ScalingPoint], out: Path, title: str, fabric: str = "") -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = {"table": out / "scaling.md", "json": out / "scaling.json", "chart": out / "scaling.png"}
    fabric_section = f"\n## Fabric\n\n{fabric}\n" if fabric else ""
    paths["table"].write_text(f"# {title}\n\n{markdown_table(points)}\n{fabric_section}")
    paths["json"].write_text(json.dumps([asdict(p) for p in points], indent=2) + "\n")
    write_chart(points, paths["chart"], title)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sizing.scaling", description="Scaling table and chart from the trainer's metrics files."
    )
    parser.add_argument("metrics", nargs="+", type=Path, help="--metrics-file of each run (JSON lines)")
    parser.add_argument("--out", type=Path, required=True, help="directory for scaling.md, .json and .png")
    parser.add_argument("--gpus-per-node", type=int, default=1, help="ranks per node (default 1: a worker a node)")
    parser.add_argument("--title", default="Scaling: throughput and efficiency", help="heading of table and chart")
    parser.add_argument(
        "--model", help="with --instance: the runs' model (preset or hub id), for the modeled efficiency"
    )
    parser.add_argument("--instance", help="with --model: the nodes' EC2 instance type from the catalog")
    parser.add_argument("--seq-len", type=int, default=2048, help="the runs' tokens per sequence (default: 2048)")
    parser.add_argument("--batch-size", type=int, default=1, help="the runs' sequences per GPU per micro step")
    parser.add_argument("--strategy", choices=SHARDING_STRATEGIES, default="FULL_SHARD", help="the runs' sharding")
    args = parser.parse_args(argv)
    try:
        if args.gpus_per_node < 1:
            raise ScalingError(f"--gpus-per-node {args.gpus_per_node} is not allowed; expected at least 1")
        if bool(args.model) != bool(args.instance):
            raise ScalingError("--model and --instance go together: the model needs both")
        points = scaling_points([read_records(path) for path in args.metrics], args.gpus_per_node)
        instance = resolve_instance(args.instance) if args.instance else None
        if instance is not None:
            shape = resolve_shape(args.model)
            config = TrainConfig(
                data=DataConfig(seq_len=args.seq_len),
                parallel=ParallelConfig(sharding_strategy=args.strategy),
                schedule=ScheduleConfig(batch_size=args.batch_size),
            )
            job = make_job(shape, config, gpus=instance.gpus)
            points = with_model(points, ModelledJob(job, instance), args.gpus_per_node)
    except (ScalingError, MetricsFileError, SizingError) as error:
        print(f"python -m sizing.scaling: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    fabric = fabric_table(points, instance)
    paths = write_report(points, args.out, args.title, fabric)
    print(markdown_table(points))
    if fabric:
        print(f"\n{fabric}")
    print(f"\nwrote {', '.join(str(path) for path in paths.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
