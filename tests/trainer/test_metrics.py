"""Metrics: one list of names, the MFU formula, and what rank 0 writes and serves."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path

import pytest

from trainer.base.metrics.figures import METRIC_FIELDS, MetricsSink, StepMetrics, training_flops_per_token
from trainer.base.model.presets import PRESETS

REQUIRED_JSON_KEYS = {
    "step", "loss", "tokens_per_second", "tokens_per_second_per_gpu", "mfu", "step_time_s", "peak_memory_bytes",
    "lr", "world_size", "restarts",
}  # fmt: skip


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def sample_metrics(step: int = 3, mfu: float | None = 0.42) -> StepMetrics:
    return StepMetrics(
        step=step, loss=2.5, tokens_per_second=1000.0, tokens_per_second_per_gpu=500.0, mfu=mfu, step_time_s=0.25,
        peak_memory_bytes=123456789, lr=1e-4, grad_norm=0.9, world_size=2, restarts=1, tokens=4096,
        cpu_time_per_step_s=0.5,
    )  # fmt: skip


def test_metric_names_are_unique_prometheus_names() -> None:
    names = [name for name, _ in METRIC_FIELDS.values()]
    assert len(set(names)) == len(names)
    assert all(name.startswith("trainer_") and name.replace("_", "").isalnum() for name in names)
    assert METRIC_FIELDS.keys() >= REQUIRED_JSON_KEYS


def test_flops_per_token_for_llama2_7b() -> None:
    shape = PRESETS["llama2-7b"]
    # 6.74e9 parameters minus the 131M input embedding; attention adds 12 * 32 * 4096 * 4096.
    expected = 6 * (shape.num_parameters - 32000 * 4096) + 12 * 32 * 4096 * 4096
    assert training_flops_per_token(shape, 4096) == expected
    assert training_flops_per_token(shape, 4096) == pytest.approx(4.61e10, rel=0.01)  # 39.7 GFLOP + 6.4 GFLOP
    # LoRA: forward and input gradients through the frozen base (4N), all of it for the adapters (6A).
    lora = 4 * (shape.num_parameters - 32000 * 4096) + 6 * 1_000_000 + 12 * 32 * 4096 * 4096
    assert training_flops_per_token(shape, 4096, adapters=1_000_000) == lora


def test_sink_writes_json_lines_and_serves_the_same_figures(tmp_path: Path) -> None:
    port = free_port()
    sink = MetricsSink(str(tmp_path / "m.jsonl"), port, "127.0.0.1")
    try:
        sink.write(sample_metrics(step=3))
        sink.write(sample_metrics(step=4, mfu=None))
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    finally:
        sink.close()
    records = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [3, 4]
    assert records[0].keys() >= REQUIRED_JSON_KEYS
    assert records[1]["mfu"] is None
    samples = dict(line.split(" ") for line in body.splitlines() if line.startswith("trainer_"))
    assert set(samples) == {name for name, _ in METRIC_FIELDS.values()}
    assert float(samples["trainer_step"]) == 4
    assert float(samples["trainer_peak_memory_bytes"]) == 123456789
    assert samples["trainer_mfu"] == "NaN"
