"""bench/data_prep.py end to end on a corpus of 1 MB: both sides run, make the same ids, and are reported."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.harness.trainer_runs import ROOT


def test_the_bench_runs_both_sides_on_the_same_corpus_and_reports_their_ratio(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "bench/data_prep.py", "--size", "1", "--rounds", "1", "--no-memory-sizes", "--workdir",
         str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line.split("|")[1:-1] for line in result.stdout.splitlines() if re.match(r"\| (ours|datasets) \|", line)]
    assert sorted(row[0].strip() for row in rows) == ["datasets", "ours"]
    for row in rows:
        assert all(float(cell) > 0 for cell in row[2:])  # wall s, MB/s, tokens/s, CPU s, RSS, PSS
    assert re.search(r"median throughput ratio ours / datasets over 1 rounds: \d+\.\d\d", result.stdout)
