"""The trainer's own parser (trainer/base/flags/config.py, torch-free) accepts exactly what the manifest passes, and
reads each flag as the spec meant it."""

from __future__ import annotations

from functools import cache

import pytest

from trainer.base.flags.config import TrainConfig, parse_args
from trainer.base.pod.exits import LAUNCH_MODULE
from workloads.job.pytorchjob import pytorchjob_manifest

from .job_stacks import STACKS, config_of, spec_of

pytestmark = pytest.mark.parametrize("stack", STACKS)


def trainer_argv(stack: str) -> list[str]:
    """Everything after `python -m trainer.launch ... -m trainer` in the container's command."""
    pod = pytorchjob_manifest(spec_of(stack))["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    (container,) = pod["containers"]
    command = container["command"]
    assert command[1:3] == ["-m", LAUNCH_MODULE]
    trainer_at = command.index("-m", 3) + 1
    assert command[trainer_at] == "trainer"
    return command[trainer_at + 1 :]


@cache
def parsed_of(stack: str) -> TrainConfig:
    return parse_args(trainer_argv(stack))  # argparse exits (SystemExit) on any flag or choice it does not know


def test_the_trainer_parser_accepts_the_manifests_command(stack: str) -> None:
    assert isinstance(parsed_of(stack), TrainConfig)


def test_the_command_parses_back_into_the_specs_trainer_config(stack: str) -> None:
    assert parsed_of(stack) == spec_of(stack).trainer


def test_model_data_and_parallelism_arrive_as_configured(stack: str) -> None:
    parsed, t = parsed_of(stack), config_of(stack).job
    assert (parsed.model.name, parsed.data.dataset, parsed.data.seq_len) == (t.model, t.dataset, t.seq_len)
    assert parsed.parallel.sharding_strategy == t.sharding_strategy
    assert parsed.parallel.mixed_precision == t.mixed_precision
    assert parsed.parallel.activation_checkpointing == t.activation_checkpointing
    assert parsed.parallel.compile is t.compile
    assert parsed.parallel.device == "cuda"
    assert parsed.parallel.replicate_groups is None  # the trainer derives it from the world size at each restart


def test_schedule_and_optimizer_arrive_as_configured(stack: str) -> None:
    parsed, t = parsed_of(stack), config_of(stack).job
    assert (parsed.schedule.batch_size, parsed.schedule.global_batch_size) == (t.batch_size, t.global_batch_size)
    assert parsed.schedule.steps == t.steps
    assert parsed.optim.lr == t.learning_rate


def test_checkpoints_and_metrics_go_to_the_runs_directory(stack: str) -> None:
    parsed, spec = parsed_of(stack), spec_of(stack)
    run_dir = spec.checkpoint.run_directory
    assert parsed.checkpoint.directory == f"{run_dir}/checkpoints"
    assert parsed.checkpoint.every == config_of(stack).job.checkpoint_every
    assert parsed.checkpoint.export_hf == f"{run_dir}/hf"
    assert parsed.metrics.file == f"{run_dir}/metrics.jsonl"
    assert parsed.metrics.port > 0
    assert parsed.metrics.peak_tflops == spec.node.peak_tflops
