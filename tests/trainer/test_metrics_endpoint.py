"""A running trainer serves its figures to Prometheus and writes the same ones to the metrics file."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.harness.trainer_runs import ROOT, TINY, trainer_env, with_flags
from tests.trainer.test_metrics import REQUIRED_JSON_KEYS, free_port
from trainer.base.metrics.figures import METRIC_FIELDS, training_flops_per_token
from trainer.base.model.presets import PRESETS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(200)]
PEAK_TFLOPS = 0.05  # any figure: on CPU, MFU is only reported when a peak is given


def scrape(port: int) -> dict[str, float]:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {line.split(" ")[0]: float(line.split(" ")[1]) for line in body.splitlines() if line.startswith("trainer_")}


def peak_rss_bytes(pid: int) -> int:
    """VmHWM: the kernel's record of the process's peak resident set, read from outside the process."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_prometheus_endpoint_and_metrics_file_while_training(tmp_path: Path) -> None:
    port, metrics_file = free_port(), tmp_path / "metrics.jsonl"
    args = with_flags(TINY, steps="100000", metrics_port=str(port), metrics_host="127.0.0.1",
                      metrics_file=str(metrics_file), peak_tflops=str(PEAK_TFLOPS))  # fmt: skip
    log = (tmp_path / "log.txt").open("w")  # a file, not a pipe: an unread pipe would fill and stall the trainer
    process = subprocess.Popen([sys.executable, "-m", "trainer", *args], cwd=ROOT, env=trainer_env(),
                               stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        samples: dict[str, float] = {}
        deadline = time.monotonic() + 150
        while samples.get("trainer_step", 0) < 3:
            assert process.poll() is None, (tmp_path / "log.txt").read_text()
            assert time.monotonic() < deadline, "no step reported on the endpoint"
            time.sleep(0.2)
            try:
                samples = scrape(port)
            except (urllib.error.URLError, ConnectionError):
                continue  # not serving yet
        process_peak = peak_rss_bytes(process.pid)
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()

    assert set(samples) == {name for name, _ in METRIC_FIELDS.values()}
    assert samples["trainer_world_size"] == 1 and samples["trainer_restarts"] == 0
    assert 4.0 < samples["trainer_loss"] < 6.0  # near ln(260) for a fresh model
    assert samples["trainer_tokens_per_second"] > 0 and samples["trainer_mfu"] > 0
    assert 0.5 * process_peak <= samples["trainer_peak_memory_bytes"] <= process_peak

    records = [json.loads(line) for line in metrics_file.read_text().splitlines()]
    assert [r["step"] for r in records[:3]] == [1, 2, 3]
    record = records[-1]
    assert record.keys() >= REQUIRED_JSON_KEYS
    assert record["tokens_per_second"] == pytest.approx(8 * 32 / record["step_time_s"])
    flops = training_flops_per_token(PRESETS["tiny"], 32)
    assert record["mfu"] == pytest.approx(record["tokens_per_second_per_gpu"] * flops / (PEAK_TFLOPS * 1e12))
