"""`python -m sizing`: the table, the JSON, and clear refusals of bad inputs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sizing.cli import main
from stack.paths import PROJECT_ROOT as ROOT


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict]:
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_module_prints_a_row_per_strategy() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sizing", "--model", "meta-llama/Llama-2-7b-hf", "--instance", "p5.48xlarge",
         "--nodes", "2"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    for strategy in ("FULL_SHARD", "HYBRID_SHARD", "SHARD_GRAD_OP", "NO_SHARD"):
        assert any(line.startswith(strategy) for line in result.stdout.splitlines()), strategy
    assert "16 x H100-SXM, 80 GiB each" in result.stdout


def test_hybrid_shard_is_left_out_on_one_node(capsys: pytest.CaptureFixture[str]) -> None:
    rows = run_json(capsys, "--model", "llama2-7b", "--instance", "p5.48xlarge", "--nodes", "1")
    assert [row["sharding_strategy"] for row in rows] == ["FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"]


def test_json_has_memory_fit_and_speed(capsys: pytest.CaptureFixture[str]) -> None:
    [row] = run_json(
        capsys, "--model", "llama2-13b", "--instance", "p4de.24xlarge", "--nodes", "2", "--strategy", "FULL_SHARD"
    )
    assert row["gpus"] == 16 and row["fits"] is True
    assert row["peak_allocated_bytes"] == sum(row["memory_bytes"].values())
    assert row["needed_bytes"] > row["peak_allocated_bytes"]
    assert row["tokens_per_second"] == pytest.approx(16 * row["tokens_per_second_per_gpu"])
    assert 0 < row["mfu"] < 1 and 0 < row["scaling_efficiency"] <= 1


def test_a_job_that_cannot_fit_says_no(capsys: pytest.CaptureFixture[str]) -> None:
    [row] = run_json(capsys, "--model", "llama2-70b", "--instance", "p5.48xlarge", "--nodes", "1", "--strategy",
                     "FULL_SHARD")  # fmt: skip
    assert row["fits"] is False and row["needed_bytes"] > row["gpu_memory_bytes"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "gpt-5", "--instance", "p5.48xlarge", "--nodes", "1"], "unknown model 'gpt-5'"),
        (["--model", "llama2-7b", "--instance", "p9.huge", "--nodes", "1"], "unknown instance type 'p9.huge'"),
        (["--model", "llama2-7b", "--instance", "p5.48xlarge", "--nodes", "0"], "--nodes 0 is not allowed"),
        (
            ["--model", "llama2-7b", "--instance", "p5.48xlarge", "--nodes", "1", "--seq-len", "9000"],
            "--seq-len 9000: exceeds",
        ),
    ],
)
def test_bad_inputs_exit_2_with_a_clear_message(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(args) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""


def test_fp32_gets_memory_but_no_speed_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    [row] = run_json(capsys, "--model", "small", "--instance", "g6e.xlarge", "--nodes", "1", "--strategy",
                     "FULL_SHARD", "--mixed-precision", "fp32", "--seq-len", "512")  # fmt: skip
    assert row["peak_allocated_bytes"] > 0 and row["tokens_per_second"] is None and row["mfu"] is None
