"""docs/sizing.md's table of the memory model against the trainer on CPU: every case of test_memory_model.py,
measured once and printed as markdown rows.

    .venv/bin/python -m tests.sizing.trainer_memory.table          # about 15 minutes on 2 cores
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from tests.sizing.trainer_memory.measure import Case, measure_baseline, measure_peak
from tests.sizing.trainer_memory.test_memory_model import CASES

MIB = 2**20


def row(case: Case, measured: int, baseline: int) -> str:
    predicted = case.predicted(baseline)
    error = (measured - predicted.total) / predicted.total
    return (
        f"| {case.model} | {case.strategy} | {case.ranks} | {case.batch_size} x {case.seq_len} | {case.checkpointing} "
        f"| {measured / MIB:,.0f} | {predicted.total / MIB:,.0f} | {100 * error:+.1f}% | {predicted.moment} |"
    )


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        baselines = {ranks: measure_baseline(Case("small", "FULL_SHARD", ranks), workdir) for ranks in (1, 2)}
        print(f"runtime baseline: {', '.join(f'{r} rank(s) {b / MIB:.0f} MiB' for r, b in baselines.items())}")
        columns = ("model", "strategy", "ranks", "batch x seq", "checkpointing", "measured MiB", "predicted MiB",
                   "error", "peak at")  # fmt: skip
        print("| " + " | ".join(columns) + " |")
        print("|---|---|---:|---|---|---:|---:|---:|---|")
        for index, case in enumerate(CASES):
            case_dir = workdir / str(index)
            case_dir.mkdir()
            print(row(case, measure_peak(case, case_dir), baselines[case.ranks]), flush=True)


if __name__ == "__main__":
    main()
