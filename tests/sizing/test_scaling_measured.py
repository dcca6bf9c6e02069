"""The scaling report and the throughput model on the bus bandwidth the trainer's fabric preflight measured (its
metrics' preflight_* fields) instead of the catalog's links."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sizing.catalog import CATALOG
from sizing.estimate import make_job, resolve_shape
from sizing.memory import Job
from sizing.scaling import main, measured_fabric, scaling_points
from sizing.throughput import Assumptions, MeasuredFabric, estimate_throughput, expected_fabric, scaling_efficiency
from trainer.base.flags.config import parse_args

P5 = CATALOG["p5.48xlarge"]


def record(step: int, world_size: int, tokens_per_second: float, **preflight: float | None) -> dict:
    """A line of the trainer's --metrics-file with the fields the report reads, and the preflight's figures."""
    return {"step": step, "world_size": world_size, "tokens_per_second": tokens_per_second, "mfu": None,
            "step_time_s": 1.0, "peak_memory_bytes": 2**30, **preflight}  # fmt: skip


def llama_7b_job() -> Job:
    return make_job(resolve_shape("llama2-7b"), parse_args(["--seq-len", "4096", "--batch-size", "1"]), gpus=8)


def test_the_preflights_figures_are_read_from_a_runs_records() -> None:
    preflight = {
        "preflight_intra_all_gather_gb_per_s": 350.0,
        "preflight_intra_reduce_scatter_gb_per_s": 330.0,
        "preflight_inter_all_reduce_gb_per_s": 38.0,
    }
    assert measured_fabric([record(1, 16, 1.0, **preflight)]) == MeasuredFabric(330.0, 38.0)
    assert measured_fabric([record(1, 8, 1.0, preflight_inter_all_reduce_gb_per_s=None)]) is None
    [one, two] = scaling_points(
        [[record(s, 8, 8.0) for s in (1, 2)], [record(s, 16, 15.0, **preflight) for s in (1, 2)]], 8
    )
    assert one.fabric is None and two.fabric == MeasuredFabric(330.0, 38.0)


def test_the_model_on_the_expected_figures_is_the_model_on_the_catalog() -> None:
    """The preflight's expectation is what the model assumes: measuring exactly that changes nothing."""
    job = llama_7b_job()
    expected = Assumptions(measured=expected_fabric(P5))
    assert estimate_throughput(job, P5, 4, expected).step_s == pytest.approx(estimate_throughput(job, P5, 4).step_s)


def test_a_slow_measured_rail_lowers_the_modeled_efficiency() -> None:
    job = llama_7b_job()  # FULL_SHARD
    slow = Assumptions(measured=MeasuredFabric(None, 2.0))  # 2 GB/s a rail: a twentieth of p5's expected 40
    assert scaling_efficiency(job, P5, 4, slow) < scaling_efficiency(job, P5, 4) - 0.05


def test_the_report_models_on_the_measured_links_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slow = {"preflight_intra_all_gather_gb_per_s": 340.0, "preflight_intra_reduce_scatter_gb_per_s": 335.0,
            "preflight_inter_all_reduce_gb_per_s": 2.0}  # fmt: skip
    runs = {1: (8, 8000.0, {}), 2: (16, 14000.0, slow)}
    files = []
    for nodes, (world, speed, figures) in runs.items():
        path = tmp_path / f"p5-{nodes}.jsonl"
        path.write_text("".join(json.dumps(record(s, world, speed, **figures)) + "\n" for s in (10, 20, 30)))
        files.append(str(path))
    args = [*files, "--gpus-per-node", "8", "--model", "llama2-7b", "--instance", "p5.48xlarge", "--seq-len", "4096"]
    assert main([*args, "--out", str(tmp_path / "report")]) == 0
    printed = capsys.readouterr().out
    assert "| 2 | 335.0 GB/s | 2.0 GB/s | 87.5% |" in printed
    assert "instead of the catalog's for p5.48xlarge (360.0 GB/s within a node, 40.0 GB/s per rail)" in printed
    [_, two] = json.loads((tmp_path / "report" / "scaling.json").read_text())
    assert two["modeled_efficiency"] < two["modeled_efficiency_catalog"]
    assert two["fabric"] == {"intra_gb_per_s": 335.0, "inter_rail_gb_per_s": 2.0}


def test_model_without_instance_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps(record(1, 8, 1.0)) + "\n")
    assert main([str(path), "--model", "llama2-7b", "--out", str(tmp_path)]) == 2
    assert "--model and --instance go together" in capsys.readouterr().err
