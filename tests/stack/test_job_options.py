"""The job.* settings that are trainer options: declared by the option (trainer/base/config.py StackKey), checked by its
rules, refused at preview in the trainer's words."""

from __future__ import annotations

import dataclasses

import pytest

from stack.config import JobConfig
from stack.fields import JOB_OPTIONS, NAMESPACE, ConfigError, parse_section, section_docs
from stack.files import raw_stack_config
from stack.parse import parse_stack_config
from stack.trainer_config import stack_trainer_config
from trainer.base.config import TrainConfig, config_problems
from trainer.base.options import options, value_at


def _job_problems(**job: object) -> list[str]:
    raw = raw_stack_config("p5-2")
    with pytest.raises(ConfigError) as refused:
        parse_stack_config({**raw, f"{NAMESPACE}:job": {**raw[f"{NAMESPACE}:job"], **job}}, "p5-2")
    return refused.value.problems


def test_every_stack_key_of_a_trainer_option_is_a_job_setting_and_reaches_the_trainer() -> None:
    documented = {doc.key for doc in section_docs(JobConfig, "job")}
    assert {f"job.{key}" for key in JOB_OPTIONS} <= documented
    trainer = stack_trainer_config(JobConfig())
    for key, option in JOB_OPTIONS.items():
        default = option.stack_default
        expected = ",".join(default) if isinstance(default, list) else default
        assert value_at(trainer, option.path) == expected, key


def test_a_stack_default_differs_from_the_trainers_only_where_declared() -> None:
    trainer = stack_trainer_config(JobConfig())
    for option in options(TrainConfig):
        if option.stack is None:
            assert value_at(trainer, option.path) == option.default, option.path


def test_the_preview_and_the_trainer_say_the_same_thing_from_one_rule() -> None:
    (stack_says,) = [p for p in _job_problems(shardingStrategy="FULL_SHARD", allReduceDtype="bf16") if "allReduce" in p]
    job = dataclasses.replace(JobConfig(), sharding_strategy="FULL_SHARD", all_reduce_dtype="bf16")
    (trainer_says,) = config_problems(stack_trainer_config(job))
    assert trainer_says == "--all-reduce-dtype bf16: only with --sharding-strategy HYBRID_SHARD (not FULL_SHARD)"
    assert stack_says == (
        "fsdp-eks:job.allReduceDtype: 'bf16' is not allowed; "
        "only with job.shardingStrategy HYBRID_SHARD (not FULL_SHARD)"
    )


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("learningRate", 0, "fsdp-eks:job.learningRate: 0.0 is not allowed; expected a number > 0"),
        ("globalBatchSize", 0, "fsdp-eks:job.globalBatchSize: 0 is not allowed; expected a number >= 1"),
        ("checkpointEvery", 0, "fsdp-eks:job.checkpointEvery: 0 is not allowed; expected a number >= 1"),
        ("allReduceDtype", "fp8", "fsdp-eks:job.allReduceDtype: 'fp8' is not allowed; expected one of fp32, bf16"),
    ],
)
def test_a_value_the_trainer_refuses_is_refused_by_the_options_own_check(
    key: str, value: object, expected: str
) -> None:
    problems: list[str] = []
    parse_section(JobConfig, "job", {key: value}, problems)
    assert problems == [expected]
