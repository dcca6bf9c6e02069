"""`python -m sizing.scaling` on metrics files written here in the trainer's format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from matplotlib import image

from sizing.scaling import main, scaling_points
from trainer.base.metrics.file import MetricsFileError, read_records


def record(step: int, world_size: int, tokens_per_second: float, **extra: float) -> dict:
    """One line of the trainer's --metrics-file (trainer/base/metrics/figures.py StepMetrics), with the fields that
    matter here."""
    return {
        "time": 0.0, "step": step, "loss": 2.0, "tokens_per_second": tokens_per_second,
        "tokens_per_second_per_gpu": tokens_per_second / world_size, "mfu": None, "step_time_s": 1.0,
        "peak_memory_bytes": 2**30, "lr": 1e-4, "grad_norm": 1.0, "world_size": world_size, "restarts": 0,
        "tokens": 0, **extra,
    }  # fmt: skip


def write_run(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_efficiency_is_per_gpu_throughput_against_the_smallest_run() -> None:
    one = [record(10, 8, 1000.0), record(20, 8, 1000.0)]
    two = [record(10, 16, 1800.0), record(20, 16, 1800.0)]
    points = scaling_points([two, one], gpus_per_node=8)
    assert [(p.nodes, p.world_size) for p in points] == [(1, 8), (2, 16)]
    assert points[0].scaling_efficiency == 1.0
    assert points[1].scaling_efficiency == pytest.approx(0.9)
    assert points[1].speedup == pytest.approx(1.8)


def test_the_first_logged_step_of_a_run_is_left_out() -> None:
    [point] = scaling_points([[record(10, 1, 10.0), record(20, 1, 100.0), record(30, 1, 102.0)]])
    assert point.tokens_per_second == pytest.approx(101.0) and point.records == 2


def test_an_elastic_run_gives_a_point_per_world_size() -> None:
    run = [record(1, 2, 50.0), record(2, 2, 200.0), record(3, 1, 40.0), record(4, 1, 110.0)]
    points = scaling_points([run])
    assert [(p.world_size, p.tokens_per_second) for p in points] == [(1, 110.0), (2, 200.0)]


def test_the_report_writes_table_json_and_chart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [
        write_run(tmp_path / f"run{n}.jsonl", [record(s, 8 * n, 1000.0 * n * 0.95 ** (n - 1)) for s in (10, 20)])
        for n in (1, 2, 4)
    ]
    assert main([*map(str, files), "--gpus-per-node", "8", "--out", str(tmp_path / "report")]) == 0
    table = (tmp_path / "report" / "scaling.md").read_text()
    assert "| 4 | 32 |" in table and "85.7%" in table  # 0.95 ** 3 (n=4 ran at 0.95^3 per GPU)
    assert json.loads((tmp_path / "report" / "scaling.json").read_text())[2]["world_size"] == 32
    chart = image.imread(tmp_path / "report" / "scaling.png")
    assert chart.shape[0] > 300 and chart.shape[1] > 600 and chart.std() > 0.05
    assert "| 1 | 8 |" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such metrics file"),
        ("", "no metrics records"),
        ("{not json\n", "not a JSON object"),
        ('{"step": 1, "loss": 2.0}\n', "missing world_size, tokens_per_second"),
    ],
)
def test_unusable_metrics_files_are_refused_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    path = tmp_path / "metrics.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(MetricsFileError, match=message):
        read_records(path)
    assert main([str(path), "--out", str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err
