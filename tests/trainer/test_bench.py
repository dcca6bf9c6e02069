"""The benchmark scripts run (tiny settings on CPU), so they are ready when a GPU or a quiet machine is."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.harness.trainer_runs import ROOT, trainer_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(200)]


def bench(*args: str, timeout: int = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=trainer_env(), capture_output=True, text=True, timeout=timeout
    )


# It runs torchtitan too: its environment is set up on first use (bench/torchtitan_setup.py, from PyPI), which on
# a fresh machine takes a few minutes.
@pytest.mark.timeout(1200)
def test_vs_torchtitan_prints_rounds_ratios_and_memory() -> None:
    done = bench("bench/vs_torchtitan.py", "--model", "tiny", "--rounds", "1", "--discard-rounds", "1", "--warmup", "2",
                 "--steps", "4", timeout=1100)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    assert "discarded: ours " in done.stdout, done.stdout  # the warm-up round, run first and not recorded
    assert "median of 2 intervals of 2" in done.stdout and "load average" in done.stdout
    for row in (
        "| ours, tokens/s |",
        "| torchtitan, tokens/s |",
        "| ours / torchtitan (wall) |",
        "| ours / torchtitan (CPU time) |",
        "| ours, peak GiB per rank |",
        "| torchtitan, peak GiB per rank |",
    ):
        assert row in done.stdout, row  # fmt: skip
    assert "median of 1 rounds" in done.stdout


def test_trainer_overhead_prints_both_loops() -> None:
    done = bench("bench/trainer_overhead.py", "--model", "tiny", "--warmup", "2", "--steps", "4", "--rounds", "1")
    assert done.returncode == 0, done.stderr
    assert "| bare fully_shard loop |" in done.stdout and "| trainer (python -m trainer) |" in done.stdout
    assert "median over rounds" in done.stdout and "tokens per CPU-second" in done.stdout


def test_lora_vs_full_prints_throughput_and_peak_memory_for_both() -> None:
    done = bench("bench/lora_vs_full.py", "--model", "tiny", "--nproc", "1", "--rounds", "1", "--warmup", "2",
                 "--steps", "2", "--seq-len", "64")  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    for title in ("tokens/s (wall time)", "tokens per CPU-second of rank 0", "peak memory of the busiest rank"):
        table = done.stdout.split(title)[1]
        rows = [line for line in table.splitlines() if line.startswith(("| full fine-tuning |", "| LoRA |"))][:2]
        assert len(rows) == 2 and all(row.count("|") == 4 for row in rows), table


def test_packing_attention_prints_both_sides_and_their_ratios() -> None:
    done = bench("bench/packing_attention.py", "--model", "tiny", "--rounds", "2", "--steps", "1", "--seq-len", "64")
    assert done.returncode == 0, done.stderr[-4000:]
    for row in ("| apart, positions/s |", "| causal, positions/s |", "| apart / causal (CPU time) |",
                "| apart / causal (record tokens per CPU-second) |"):  # fmt: skip
        assert row in done.stdout, row
    assert "median of 2 rounds" in done.stdout and "% of positions hold a record" in done.stdout
