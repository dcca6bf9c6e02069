"""job.validation: a map of the trainer's validation flags, parsed and checked at preview, rendered into the pods'
flags by stack/trainer_config.py, and refused with the fix when its keys do not go together."""

from __future__ import annotations

from typing import Any

import pytest

from stack.config import StackConfig
from stack.fields import ConfigError
from stack.files import load_stack_config, raw_stack_config, stack_names
from stack.parse import parse_stack_config
from stack.trainer_config import job_s3_inputs, stack_trainer_config
from trainer.base.flags.config import ValidationConfig, parse_args
from workloads.job.pod import trainer_args
from workloads.job.spec import job_spec

WHERE = "fsdp-eks:job.validation"


def dev_with(validation: Any, **job: Any) -> StackConfig:
    raw = raw_stack_config("dev")
    raw["fsdp-eks:job"] = {**raw["fsdp-eks:job"], **job, "validation": validation}
    return parse_stack_config(raw, "dev")


def refusals(validation: Any, **job: Any) -> list[str]:
    with pytest.raises(ConfigError) as refused:
        dev_with(validation, **job)
    return refused.value.problems


def test_the_pods_trainer_gets_every_validation_flag_the_stack_sets() -> None:
    config = dev_with({"split": 0.1, "every": 50, "keepBest": True, "earlyStopPatience": 3})
    parsed = parse_args(trainer_args(job_spec(config)))
    assert parsed.validation == ValidationConfig(split=0.1, every=50, keep_best=True, early_stop_patience=3)


@pytest.mark.parametrize("stack", stack_names())
def test_every_stacks_pods_run_its_validation(stack: str) -> None:
    config = load_stack_config(stack)
    ours, run = config.job.validation, parse_args(trainer_args(job_spec(config))).validation
    assert (run.split, run.dataset, run.dataset_split, run.every, run.keep_best, run.early_stop_patience) == (
        ours.split,
        ours.dataset,
        ours.dataset_split,
        ours.every,
        ours.keep_best,
        ours.early_stop_patience,
    )


def test_a_separate_validation_data_set_is_the_trainers_val_dataset() -> None:
    config = dev_with({"dataset": "s3://corpora/val.jsonl", "every": 25})
    assert stack_trainer_config(config.job).validation == ValidationConfig(dataset="s3://corpora/val.jsonl", every=25)


def test_without_validation_the_trainer_gets_no_validation_flag() -> None:
    config = dev_with(None)
    assert stack_trainer_config(config.job).validation == ValidationConfig()
    assert not any(
        flag.startswith(("--val", "--eval", "--keep-best", "--early")) for flag in trainer_args(job_spec(config))
    )


def test_an_s3_validation_data_set_is_one_of_the_jobs_s3_inputs_once() -> None:
    config = dev_with({"dataset": "s3://corpora/val.jsonl"}, dataset="s3://corpora/train.jsonl")
    assert job_s3_inputs(config.job) == ("s3://corpora/train.jsonl", "s3://corpora/val.jsonl")
    same = dev_with({"dataset": "s3://corpora/train.jsonl", "datasetSplit": "test"}, dataset="s3://corpora/train.jsonl")
    assert job_s3_inputs(same.job) == ("s3://corpora/train.jsonl",)


def test_the_training_data_set_as_its_own_validation_data_set_is_refused_in_the_same_split() -> None:
    """The trainer's rule (trainer/base/flags/config.py not_the_training_records): read in job.dataset's split, it is
    the training records."""
    for validation in ({"dataset": "owner/corpus"}, {"dataset": "owner/corpus", "datasetSplit": "train"}):
        assert refusals(validation, dataset="owner/corpus") == [
            f"{WHERE}.dataset: 'owner/corpus' is not allowed; is job.dataset, read in the same split (train): its "
            "records are trained on; give job.validation.datasetSplit another split (such as validation), hold "
            "records out with job.validation.split (such as 0.02) instead, or give a data set of held-out records"
        ]
    config = dev_with({"dataset": "owner/corpus", "datasetSplit": "validation"}, dataset="owner/corpus")
    run = parse_args(trainer_args(job_spec(config)))
    assert (run.data.dataset_split, run.validation.dataset, run.validation.dataset_split) == (
        "train",
        "owner/corpus",
        "validation",
    )


def test_a_validation_split_name_without_a_validation_data_set_is_refused() -> None:
    assert refusals({"split": 0.1, "datasetSplit": "validation"}) == [
        f"{WHERE}.datasetSplit: 'validation' is not allowed; needs job.validation.dataset, the data set it is a split "
        "of"
    ]


@pytest.mark.parametrize("split", [0.5, 0.7, -0.1])
def test_a_split_outside_zero_to_a_half_is_refused(split: float) -> None:
    assert refusals({"split": split}) == [
        f"{WHERE}.split: {split!r} is not allowed; expected a fraction from 0 up to, not including, 0.5 (0: no "
        "held-out split)"
    ]


def test_a_malformed_s3_validation_data_set_is_refused_as_job_dataset_is() -> None:
    [problem] = refusals({"dataset": "s3://"})
    assert problem.startswith(f"{WHERE}.dataset: 's3://' is not allowed; expected a well-formed s3://bucket/key URI")


def test_a_split_and_a_data_set_together_are_refused() -> None:
    assert refusals({"split": 0.1, "dataset": "s3://corpora/val.jsonl"}) == [
        f"{WHERE}.dataset: 's3://corpora/val.jsonl' is not allowed; not with job.validation.split 0.1; choose one "
        "held-out set: a split of job.dataset or a data set of its own"
    ]


def test_what_evaluates_a_held_out_set_is_refused_without_one() -> None:
    problems = refusals({"every": 10, "keepBest": True, "earlyStopPatience": 2})
    assert [p.split(":", 2)[1] for p in problems] == [
        "job.validation.every",
        "job.validation.keepBest",
        "job.validation.earlyStopPatience",
    ]
    needs = "needs a held-out set: job.validation.split (such as 0.02) or job.validation.dataset"
    assert all(p.endswith(f"is not allowed; {needs}") for p in problems)


def test_early_stop_without_evaluations_before_the_last_step_is_refused() -> None:
    assert refusals({"split": 0.1, "earlyStopPatience": 2}) == [
        f"{WHERE}.earlyStopPatience: 2 is not allowed; needs job.validation.every above 0 (such as 100): with 0 the "
        "one evaluation is at the last step, with nothing left to stop"
    ]


def test_negative_counts_and_unknown_keys_are_refused_by_name() -> None:
    problems = refusals({"split": 0.1, "every": -1, "earlyStopPatience": -2, "patience": 3})
    assert (
        f"{WHERE}.patience: unknown key; allowed keys are dataset, datasetSplit, earlyStopPatience, every, keepBest, "
        "split" in problems
    )
    assert f"{WHERE}.every: -1 is not allowed; expected a number >= 0" in problems
    assert f"{WHERE}.earlyStopPatience: -2 is not allowed; expected a number >= 0" in problems
