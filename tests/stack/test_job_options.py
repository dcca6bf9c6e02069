"""The job.* settings that are trainer options: declared by the option (trainer/base/flags/config.py StackKey), checked
by its rules, refused at preview in the trainer's words."""

from __future__ import annotations

import dataclasses

import pytest

from sizing.estimate import SizingError, make_job
from stack.config import JobConfig, LoraSettings
from stack.fields import JOB_OPTIONS, NAMESPACE, ConfigError, parse_section, section_docs, stack_problem
from stack.files import raw_stack_config
from stack.parse import parse_stack_config
from stack.trainer_config import stack_trainer_config
from trainer.base.flags.config import LORA_TARGET_NAMES, TrainConfig, config_problems, parse_args, to_argv
from trainer.base.flags.options import Facts, by_path, flag_of, options, rule_problems, value_at
from trainer.base.model.source import resolve_model
from trainer.base.pod.env import DistEnv
from trainer.validate import validate

# The pods of p5-2 (2 x p5.48xlarge), one rank per GPU; a preset model, so that the trainer resolves it here.
P5_2_RANKS = DistEnv(rank=0, world_size=16, local_rank=0, local_world_size=8)
MODEL = "tiny"


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


def _job(**job: object) -> JobConfig:
    """p5-2's job section with these keys, through each key's own checks only (not the rules across keys)."""
    problems: list[str] = []
    parsed = parse_section(JobConfig, "job", {**raw_stack_config("p5-2")[f"{NAMESPACE}:job"], **job}, problems)
    assert problems == []
    return parsed


def _trainer_says(job: JobConfig) -> list[str]:
    """What the pods' trainer says at start (trainer/validate.py) with the flags the stack gives it."""
    config = parse_args(to_argv(stack_trainer_config(job)))
    return validate(config, P5_2_RANKS, "cpu", resolve_model(config.model.name))


@pytest.mark.parametrize(
    ("job", "key", "flag"),
    [
        # The held-out set: one of a split and a data set; what evaluates it needs one; not the training records.
        ({"validation": {"split": 0.1, "dataset": "owner/val"}}, "validation.dataset", "--val-dataset owner/val"),
        ({"validation": {"datasetSplit": "test"}}, "validation.datasetSplit", "--val-dataset-split test"),
        ({"dataset": "owner/c", "validation": {"dataset": "owner/c"}}, "validation.dataset", "--val-dataset owner/c"),
        ({"validation": {"every": 10}}, "validation.every", "--eval-every 10"),
        ({"validation": {"keepBest": True}}, "validation.keepBest", "--keep-best"),
        (
            {"validation": {"split": 0.1, "earlyStopPatience": 2}},
            "validation.earlyStopPatience",
            "--early-stop-patience 2",
        ),
        # The sequence against the model's positions: a rule that needs the model's shape.
        ({"seqLen": 1024}, "seqLen", "--seq-len 1024"),
        # Whole micro steps: a rule that needs the world size (16 ranks, one sequence each per micro step).
        ({"globalBatchSize": 24}, "globalBatchSize", "--global-batch-size 24"),
    ],
)
def test_the_preview_and_the_trainer_refuse_a_job_by_the_same_declared_rule(
    job: dict[str, object], key: str, flag: str
) -> None:
    parsed = _job(model=MODEL, **job)
    facts = Facts(shape=resolve_model(MODEL).shape, world_size=P5_2_RANKS.world_size)
    (rule,) = [p for p in rule_problems(stack_trainer_config(parsed), facts) if p.path == JOB_OPTIONS[key].path]
    preview, trainer = stack_problem(rule), rule.render(flag_of(TrainConfig))
    assert preview.startswith(f"{NAMESPACE}:job.{key}: ") and trainer.startswith(f"{flag}: ")
    assert preview in _job_problems(model=MODEL, **job)
    assert trainer in _trainer_says(parsed)
    with pytest.raises(SizingError) as sized:  # the fit check's sizing refuses it by the same rule
        make_job(resolve_model(MODEL).shape, stack_trainer_config(parsed), gpus=P5_2_RANKS.world_size)
    assert trainer in str(sized.value)


def test_the_preview_and_the_trainer_refuse_lora_targets_by_the_options_own_check() -> None:
    """An option's own check (one Check): the preview says what is allowed, the trainer what is wrong."""
    assert by_path(TrainConfig)["lora.targets"].checks == (LORA_TARGET_NAMES,)
    targets = ["q_proj", "lm_head"]
    preview = _job_problems(model=MODEL, lora={"rank": 8, "targets": targets})
    assert f"{NAMESPACE}:job.lora.targets: {targets!r} is not allowed; expected {LORA_TARGET_NAMES.allowed}" in preview
    job = dataclasses.replace(_job(model=MODEL), lora=LoraSettings(rank=8, targets=targets))
    assert (
        f"--lora-targets q_proj,lm_head: lm_head: not a decoder layer's linear layer; {LORA_TARGET_NAMES.reason}"
        in _trainer_says(job)
    )


def test_a_job_that_breaks_no_rule_is_refused_by_neither() -> None:
    job = _job(model=MODEL, seqLen=512, globalBatchSize=32, validation={"split": 0.1, "every": 10, "keepBest": True})
    assert rule_problems(stack_trainer_config(job), Facts(resolve_model(MODEL).shape, 16)) == []
    assert not [e for e in _trainer_says(job) if e.startswith(("--seq-len", "--global-batch", "--val", "--eval"))]


@pytest.mark.parametrize(("key", "flag"), [("dataset", "--val-dataset"), ("datasetSplit", "--val-dataset-split")])
def test_an_empty_held_out_name_is_refused_by_the_preview_and_the_trainer(key: str, flag: str) -> None:
    """An empty name would count as given to the rules across options while the trainer reads it as none: the held-out
    loss would never be evaluated, and --keep-best and --early-stop-patience would do nothing."""
    preview = _job_problems(model=MODEL, validation={"dataset": "owner/val", key: "", "every": 10})
    assert f"{NAMESPACE}:job.validation.{key}: '' is not allowed; expected a non-empty name" in preview
    argv = ["--model", MODEL, "--dataset", "owner/c", "--val-dataset", "owner/val", "--eval-every", "10", flag, ""]
    assert any(problem.startswith(f"{flag} '': must not be empty") for problem in config_problems(parse_args(argv)))
