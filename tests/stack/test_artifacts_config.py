"""The artifacts section and the job's S3 keys: what is accepted, what is refused (naming the key, the value and what
is allowed), and that an s3:// model is never taken for a gated hub repository."""

from __future__ import annotations

from typing import Any

import pytest

from stack.artifacts import (
    artifacts_flag,
    bucket_replacement_problem,
    prefix_problem,
    run_key,
    run_uri,
    stack_key,
)
from stack.fields import ConfigError
from stack.files import raw_stack_config
from stack.gated_models import gated_repo, hf_token_problems, hub_repo
from stack.names import artifacts_bucket_prefix
from stack.parse import parse_stack_config

ARTIFACTS = "fsdp-eks:artifacts"
JOB = "fsdp-eks:job"


def parsed(overrides: dict[str, Any]) -> Any:
    raw = raw_stack_config("dev")
    for key, value in overrides.items():
        raw[key] = {**raw.get(key, {}), **value}
    return parse_stack_config(raw, "dev")


def problems(overrides: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as refused:
        parsed(overrides)
    return refused.value.problems


def test_by_default_the_stack_makes_its_own_bucket_and_writes_every_checkpoint_under_fsdp_eks() -> None:
    artifacts = parsed({}).artifacts
    assert (artifacts.bucket, artifacts.prefix, artifacts.checkpoint_every) == (None, "fsdp-eks", None)


def test_an_existing_bucket_and_a_nested_prefix_are_accepted() -> None:
    artifacts = parsed({ARTIFACTS: {"bucket": "team-ml-artifacts", "prefix": "teams/ml"}}).artifacts
    assert (artifacts.bucket, artifacts.prefix) == ("team-ml-artifacts", "teams/ml")


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({ARTIFACTS: {"bucket": "Team_Bucket"}}, "artifacts.bucket: 'Team_Bucket' is not allowed"),
        ({ARTIFACTS: {"bucket": "ab"}}, "artifacts.bucket: 'ab' is not allowed"),
        (
            {ARTIFACTS: {"bucket": "team.models"}},
            "artifacts.bucket: 'team.models' is not allowed; expected a bucket without dots",
        ),
        ({JOB: {"resumeFrom": "s3://team.models/run-1/checkpoints"}}, "a bucket without dots"),
        ({ARTIFACTS: {"prefix": "/runs/"}}, "artifacts.prefix: '/runs/' is not allowed"),
        ({ARTIFACTS: {"prefix": "runs//x"}}, "artifacts.prefix: 'runs//x' is not allowed"),
        ({ARTIFACTS: {"prefix": "runs/*"}}, "artifacts.prefix: 'runs/*' is not allowed"),
        ({ARTIFACTS: {"checkpointEvery": 0}}, "artifacts.checkpointEvery: 0 is not allowed"),
        (
            {ARTIFACTS: {"checkpointEvery": 75}},
            "artifacts.checkpointEvery: 75 is not allowed with job.checkpointEvery 50",
        ),
        ({JOB: {"resumeFrom": "/checkpoints/run-1"}}, "job.resumeFrom: '/checkpoints/run-1' is not allowed"),
        ({JOB: {"resumeFrom": "s3://B/x"}}, "job.resumeFrom: 's3://B/x' is not allowed"),
        ({JOB: {"dataset": "s3://data/a//x.jsonl"}}, "job.dataset: 's3://data/a//x.jsonl' is not allowed"),
        ({JOB: {"model": "s3://m"}}, "job.model: 's3://m' is not allowed"),
        ({ARTIFACTS: {"bucketName": "x"}}, "artifacts.bucketName: unknown key"),
    ],
)
def test_a_bad_s3_setting_is_refused_naming_its_key_and_value(overrides: dict[str, Any], named: str) -> None:
    assert any(named in problem for problem in problems(overrides)), problems(overrides)


def test_s3_checkpoints_every_multiple_of_the_checkpoint_interval_are_accepted() -> None:
    assert parsed({ARTIFACTS: {"checkpointEvery": 100}}).artifacts.checkpoint_every == 100


def test_s3_inputs_and_a_resume_point_are_accepted() -> None:
    job = parsed(
        {
            JOB: {
                "dataset": "s3://team-data/corpora/",
                "model": "s3://team-models/llama-3-8b/",
                "resumeFrom": "s3://old-artifacts/fsdp-eks/dev/run-2/checkpoints",
            }
        }
    ).job
    assert job.resume_from == "s3://old-artifacts/fsdp-eks/dev/run-2/checkpoints"


def test_an_s3_model_is_read_from_s3_never_from_the_hub_and_needs_no_token() -> None:
    model = "s3://team-models/meta-llama/Llama-2-7b-hf/"
    assert hub_repo(model) is None and gated_repo(model) is None
    assert hf_token_problems(model, None) == []


def test_each_run_has_its_own_key_under_the_stacks() -> None:
    assert stack_key("fsdp-eks", "dev") == "fsdp-eks/dev/"
    assert run_key("fsdp-eks", "dev", 3) == "fsdp-eks/dev/run-3/"
    assert str(run_uri("b-1", "teams/ml", "dev", 3)) == "s3://b-1/teams/ml/dev/run-3/"
    assert artifacts_flag("fsdp-eks", "dev", 3) == "s3://$(FSDP_EKS_ARTIFACTS_BUCKET)/fsdp-eks/dev/run-3"


@pytest.mark.parametrize("prefix", ["fsdp-eks", "teams/ml/fsdp-eks", "a.b_c-d"])
def test_well_formed_prefixes_pass(prefix: str) -> None:
    assert prefix_problem(prefix) is None


@pytest.mark.parametrize("prefix", ["", "x/", "/x", "a//b", "a/../b", "a b", "a/./b"])
def test_malformed_prefixes_fail(prefix: str) -> None:
    assert prefix_problem(prefix) is not None


BOUNDARY = "arn:aws:iam::123456789012:policy/fsdp-eks-role-boundary"


def test_a_ci_deployed_stack_writes_only_to_a_bucket_its_boundary_allows() -> None:
    ci = {
        "fsdp-eks:cluster": {"rolePermissionsBoundary": BOUNDARY, "creatorRoleArn": "arn:aws:iam::123456789012:role/d"}
    }
    refused = problems({**ci, ARTIFACTS: {"bucket": "team-ml-artifacts"}})
    assert any("artifacts.bucket: 'team-ml-artifacts' is not allowed on a stack CI deploys" in p for p in refused)
    assert (
        parsed({**ci, ARTIFACTS: {"bucket": "fsdp-eks-kept-artifacts"}}).artifacts.bucket == "fsdp-eks-kept-artifacts"
    )
    assert parsed({ARTIFACTS: {"bucket": "team-ml-artifacts"}}).artifacts.bucket == "team-ml-artifacts"  # not CI's


CREATED = f"{artifacts_bucket_prefix('dev')}{'7' * 26}"


@pytest.mark.parametrize(
    ("created", "region"),
    [(None, None), (CREATED, "us-east-1"), (CREATED, None)],  # nothing created before; the same bucket
)
def test_creating_the_bucket_again_as_before_is_no_replacement(created: str | None, region: str | None) -> None:
    assert bucket_replacement_problem(created, region, "dev", "us-east-1") is None


@pytest.mark.parametrize(
    ("stack", "region", "reason"),
    [("dev2", "us-east-1", "the stack's now (renamed?)"), ("dev", "eu-west-1", "it is in us-east-1")],
)
def test_a_new_name_or_region_would_replace_the_bucket(stack: str, region: str, reason: str) -> None:
    problem = bucket_replacement_problem(CREATED, "us-east-1", stack, region)
    assert problem is not None and reason in problem and CREATED in problem
