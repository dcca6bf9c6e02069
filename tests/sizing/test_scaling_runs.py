"""The scaling report from real runs: the trainer at 1 and 2 workers (torchrun --standalone), then the report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from matplotlib import image

from stack.paths import PROJECT_ROOT as ROOT
from tests.harness.trainer_runs import run_trainer, trainer_env

TRAINER_ARGS = [
    "--model", "tiny", "--dataset", "synthetic", "--device", "cpu", "--seq-len", "64", "--batch-size", "2",
    "--steps", "6", "--log-every", "2",
]  # fmt: skip


def run(command: list[str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        command, cwd=ROOT, env=trainer_env(), capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stdout}\n{result.stderr}"
    return result


@pytest.mark.slow
def test_scaling_report_from_local_runs_at_one_and_two_workers(tmp_path: Path) -> None:
    files = []
    for workers in (1, 2):
        metrics = tmp_path / f"workers-{workers}.jsonl"
        trained = run_trainer([*TRAINER_ARGS, "--metrics-file", str(metrics)], tmp_path, workers, torchrun=True)
        assert trained.returncode == 0, trained.output
        files.append(metrics)
    report = tmp_path / "report"
    printed = run([sys.executable, "-m", "sizing.scaling", *map(str, files), "--out", str(report)]).stdout

    points = json.loads((report / "scaling.json").read_text())
    assert [p["world_size"] for p in points] == [1, 2]
    assert points[0]["scaling_efficiency"] == 1.0
    # Logged at steps 2, 4, 6; the first (start-up) is left out: the median of steps 4 and 6.
    measured = [json.loads(line) for line in files[1].read_text().splitlines()]
    expected = sum(r["tokens_per_second"] for r in measured[1:]) / 2
    assert points[1]["tokens_per_second"] == pytest.approx(expected)
    assert points[1]["scaling_efficiency"] == pytest.approx(expected / 2 / points[0]["tokens_per_second"])
    table = (report / "scaling.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith(("| 1 | 1 |", "| 2 | 2 |"))]
    assert len(rows) == 2 and f"{100 * points[1]['scaling_efficiency']:.1f}%" in rows[1]
    assert table.strip().splitlines()[-1] in printed
    chart = image.imread(report / "scaling.png")
    assert (report / "scaling.png").stat().st_size > 10_000 and chart.shape[:2] >= (400, 800) and chart.std() > 0.05
