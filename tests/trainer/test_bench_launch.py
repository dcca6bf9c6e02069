"""The benchmark starts a failed run again a bounded number of times, then stops with the run's output."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench import vs_torchtitan


def flaky(counter: Path, failures: int) -> list[str]:
    """A command that fails its first `failures` runs, then succeeds."""
    script = (
        "import pathlib, sys; p = pathlib.Path(sys.argv[1]); n = int(p.read_text() or 0) + 1; p.write_text(str(n)); "
        f"print('run', n); sys.exit(1 if n <= {failures} else 0)"
    )
    counter.write_text("")
    return [sys.executable, "-c", script, str(counter)]


def test_a_run_that_fails_once_is_run_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    vs_torchtitan.launch(flaky(tmp_path / "n", failures=1), tmp_path / "log")
    assert (tmp_path / "n").read_text() == "2"
    assert "rerun (1 of 2)" in capsys.readouterr().out


def test_a_run_that_keeps_failing_stops_the_bench_with_its_output(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="exited with 1 3 times; the end of its output:\nrun 3"):
        vs_torchtitan.launch(flaky(tmp_path / "n", failures=5), tmp_path / "log")
    assert (tmp_path / "n").read_text() == str(vs_torchtitan.LAUNCH_ATTEMPTS)
