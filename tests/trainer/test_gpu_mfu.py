"""The prepared GPU command (bench/gpu_mfu.py) ready for its one run on the lent machine: its logic run here as its
dry run (the tiny shape on the CPU) on that machine's software as tests/harness/floor.py simulates it (torch's API as
of 2.11, its missing packages, no network), with torchtitan and its missing requirements only from the carried wheels;
and its pure parts (the layer count, the figures, the verdict)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.carried_torchtitan import CARRIED, WHEELS, download, wheel_files
from bench.gpu_machine import ClockSampler
from bench.gpu_mfu import ROWS, RowRun, fitting_layers, row_summary, verdict
from bench.gpu_rows import RowResult, Windows, Work
from stack.paths import PROJECT_ROOT
from tests.harness.floor import floor_env
from trainer.base.model.presets import PRESETS
from trainer.base.units import GIB

H200_BYTES = 143_771 * 2**20  # nvidia-smi's memory.total on the lent H200 (KINDS.md)


@pytest.fixture(scope="module")
def carried_wheels() -> list[Path]:
    """The wheels as a developer carries them: downloaded here (PyPI) when the folder lacks them."""
    try:
        return wheel_files(WHEELS)
    except SystemExit:
        return download(WHEELS)


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.usefixtures("carried_wheels")
def test_the_dry_run_on_the_lent_machines_software_reports_four_rows_and_the_verdict(tmp_path: Path) -> None:
    command = [sys.executable, "bench/gpu_mfu.py", "--dry-run", "--rounds", "1", "--out", str(tmp_path)]
    env = {**os.environ, **floor_env(), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=1400)
    log = (tmp_path / "rows.log").read_text() if (tmp_path / "rows.log").exists() else ""
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + log[-6000:]
    record = json.loads((tmp_path / "gpu_mfu.json").read_text())
    rows = record["rows"]
    assert list(rows) == ["ours eager", "torchtitan eager", "ours compiled", "torchtitan compiled"], log[-6000:]
    for label, row in rows.items():
        assert row["windows"] == 2 and row["tokens_per_second"] > 0, (label, row, log[-6000:])
        assert row["parameters"] == PRESETS["tiny"].num_parameters  # both build the same model
        assert "_scaled_dot_product_flash_attention" in row["attention"], row["attention"]
    assert record["software"]["torch"].startswith("2.")
    table = (tmp_path / "gpu_mfu.md").read_text()
    assert "| torchtitan compiled |" in table and "goal 1, ours compiled >= torchtitan compiled:" in done.stdout
    assert "goal 2, ours compiled MFU >= 45%: not measured" in done.stdout  # a CPU has no bf16 peak to divide by


def test_the_most_layers_that_fit_the_h200_by_the_sizing_model() -> None:
    layers, peak = fitting_layers(H200_BYTES, seq_len=4096, batch_size=2)
    assert layers == 16 and 60 * GIB < peak < 100 * GIB
    assert fitting_layers(80 * GIB, seq_len=4096, batch_size=2)[0] < 16  # an H100 fits fewer


@pytest.mark.slow
def test_without_a_gpu_the_command_says_to_use_the_dry_run(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "bench/gpu_mfu.py", "--out", str(tmp_path)], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode != 0 and "no CUDA device here: --dry-run" in done.stderr


def result(trainer: str, compile: bool, seconds: list[float]) -> RowResult:
    return RowResult(trainer=trainer, compile=compile, tokens_per_step=8192, window_seconds=seconds, window_steps=5,
                     parameters=4_540_000_000, matmul_parameters=4_015_000_000, attention_flops_per_token=3.2e9,
                     peak_memory_bytes=80 * GIB, attention="aten::_scaled_dot_product_flash_attention")  # fmt: skip


def test_a_rows_figure_is_the_median_of_its_windows_over_rounds_with_their_spread() -> None:
    runs = [RowRun("ours", True, 0, 60.0, result("ours", True, [4.0, 5.0])),
            RowRun("ours", True, 1, 40.0, result("ours", True, [4.0, 8.0]))]  # fmt: skip
    row = row_summary("ours compiled", runs, peak_flops=989e12, matmul_tflops=800.0, sampler=ClockSampler())
    speeds = sorted(8192 * 5 / s for s in (4.0, 5.0, 4.0, 8.0))
    assert row["windows"] == 4 and row["tokens_per_second"] == pytest.approx((speeds[1] + speeds[2]) / 2)
    assert (row["min"], row["max"]) == (speeds[0], speeds[-1])
    assert row["mfu"] == pytest.approx(row["tokens_per_second"] * (6 * 4_015_000_000 + 3.2e9) / 989e12)
    assert row["mfu_of_measured_matmul"] > row["mfu"]


def test_a_failed_row_is_reported_and_judged_not_measured() -> None:
    runs = [RowRun("ours", True, 0, 600.0, None, "stopped at the time budget (430 s)")]
    rows = {f"{t} {'compiled' if c else 'eager'}": row_summary(f"{t} {'compiled' if c else 'eager'}", runs, 989e12,
                                                               None, ClockSampler()) for t, c in ROWS}  # fmt: skip
    assert rows["ours compiled"]["failures"] == ["round 0: stopped at the time budget (430 s)"]
    assert "goal 1, ours compiled >= torchtitan compiled: not measured (a compiled row failed)" in verdict(rows, False)


@pytest.mark.parametrize(("ours", "theirs", "mfu", "expected"), [
    (11_000, 10_000, 0.46, ["1.100x -> MET", "46.0% -> MET"]),
    (9_000, 10_000, 0.40, ["0.900x -> NOT MET", "40.0% -> NOT MET"]),
])  # fmt: skip
def test_the_verdict_names_each_goal_with_its_figure(
    ours: float, theirs: float, mfu: float, expected: list[str]
) -> None:
    rows = {"ours compiled": {"tokens_per_second": ours, "mfu": mfu},
            "torchtitan compiled": {"tokens_per_second": theirs}}  # fmt: skip
    lines = verdict(rows, dry_run=False)
    assert lines[2].startswith("goal 1") and lines[2].endswith(expected[0])
    assert lines[3].startswith("goal 2") and lines[3].endswith(expected[1])


def test_windows_are_timed_after_the_warmup_steps() -> None:
    work = Work(layers=2, seq_len=8, batch_size=1, warmup_steps=2, window_steps=3, windows=2, compile=False,
                device="cpu")  # fmt: skip
    windows = Windows(work)
    for _ in range(work.steps):
        windows.step_done()
    assert len(windows.seconds) == 2 and all(seconds >= 0 for seconds in windows.seconds)


def test_of_the_carried_wheels_each_python_takes_its_own_and_a_missing_one_stops_it(tmp_path: Path) -> None:
    for name, version in CARRIED:
        tags = ("py311-none-any", "py312-none-any") if name == "multiprocess" else ("py3-none-any",)
        for tag in tags:
            (tmp_path / f"{name}-{version}-{tag}.whl").touch()
    mine = f"py{sys.version_info.major}{sys.version_info.minor}-none-any"
    assert [path.name for path in wheel_files(tmp_path)][-1] == f"multiprocess-0.70.19-{mine}.whl"
    (tmp_path / "torchtitan-0.2.2-py3-none-any.whl").unlink()
    with pytest.raises(SystemExit, match=r"no torchtitan 0\.2\.2 wheel for this Python"):
        wheel_files(tmp_path)
