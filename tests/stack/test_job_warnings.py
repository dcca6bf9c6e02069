"""Preview warns about a valid job that is probably not what its author meant: a preset (random weights) trained on
a real data set."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stack.files import load_stack_config
from stack.job_warnings import job_warnings, random_preset_warning
from tests.harness.pulumi_program import run_program

P5_2 = load_stack_config("p5-2")


def test_a_preset_on_a_real_data_set_is_warned_about_with_its_hub_id() -> None:
    warning = random_preset_warning(replace(P5_2.job, model="llama3.1-8b", dataset="s3://data/train.jsonl"))
    assert warning is not None
    assert "job.model 'llama3.1-8b' is a preset: random weights" in warning
    assert "s3://data/train.jsonl" in warning and "job.model meta-llama/Llama-3.1-8B" in warning


def test_a_preset_without_a_hub_checkpoint_is_pointed_at_a_pretrained_model() -> None:
    warning = random_preset_warning(replace(P5_2.job, model="tiny", dataset="knkarthick/dialogsum"))
    assert warning is not None and "set a hub id or an s3:// model directory" in warning


def test_no_warning_for_a_pretrained_model_or_the_synthetic_data() -> None:
    assert random_preset_warning(P5_2.job) is None  # meta-llama/Llama-2-7b-hf: the published weights
    assert random_preset_warning(replace(P5_2.job, model="s3://models/llama/")) is None
    assert random_preset_warning(load_stack_config("dev").job) is None  # tiny on synthetic: the smoke test


def test_no_shipped_stack_trains_a_preset_on_real_data() -> None:
    from stack.files import stack_names

    assert {stack: job_warnings(load_stack_config(stack).job) for stack in stack_names()} == {
        stack: [] for stack in stack_names()
    }


@pytest.mark.program
def test_preview_shows_the_warning() -> None:
    run = run_program("p5-2", {"fsdp-eks:job": {"model": "llama3.1-8b", "dataset": "s3://data/train.jsonl"}})
    assert run.error is None, run.error
    warnings = [entry["message"] for entry in run.log if entry["severity"] == "warning"]
    assert any("is a preset: random weights" in message for message in warnings), warnings
