"""The benchmark scripts run (tiny settings on CPU), so they are ready when a GPU or a quiet machine is."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from tests.trainer.runs import ROOT, trainer_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(200)]


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=trainer_env(), capture_output=True, text=True, timeout=180
    )


def test_gpu_mfu_dry_run_reports_throughput_and_mfu() -> None:
    done = bench("bench/gpu_mfu.py", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "| tokens/s/GPU | MFU |" in done.stdout
    assert "%" in done.stdout.split("| tokens/s/GPU | MFU |")[1]


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU machine this would run the real benchmark")
def test_gpu_mfu_without_a_gpu_says_so() -> None:
    done = bench("bench/gpu_mfu.py", "--layers", "1")
    assert done.returncode != 0
    assert "--device cuda: no CUDA device" in done.stderr


def test_trainer_overhead_prints_both_loops() -> None:
    done = bench("bench/trainer_overhead.py", "--model", "tiny", "--warmup", "2", "--steps", "4", "--rounds", "1")
    assert done.returncode == 0, done.stderr
    assert "| bare fully_shard loop |" in done.stdout and "| trainer (python -m trainer) |" in done.stdout
    assert "median over rounds" in done.stdout and "tokens per CPU-second" in done.stdout
