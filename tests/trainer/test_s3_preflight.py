"""Staging asks, before any GPU work, whether the run can write its durable tier and find its --resume-from
(trainer/checkpoint/durable_preflight.py, trainer/stage.py check_durable_tier), against moto's S3 API on 127.0.0.1: a
bucket the pods
may read but not write, one in another region, a --resume-from with nothing to resume or of another model, each end
staging once with exit 4 naming the URI; a bucket that takes the write is left as it was."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.s3_access import artifacts_policy
from local.s3 import LocalS3
from tests.harness.moto_iam import guarded_s3
from tests.harness.trainer_runs import TINY, run_served, with_flags
from tests.trainer.test_s3_inputs import last_line, s3_env
from trainer.base.model.presets import PRESETS
from trainer.base.pod.exits import EXIT_STAGING_FAILED
from trainer.checkpoint.layout import META_FILE, checkpoint_name, model_fingerprint

ARTIFACTS = "fsdp-eks-dev-artifacts-preflight"
ELSEWHERE = "fsdp-eks-dev-artifacts-frankfurt"
RUN_KEY = "fsdp-eks/dev/run-1/"
RUN = f"s3://{ARTIFACTS}/{RUN_KEY.rstrip('/')}"


@pytest.fixture(scope="module")
def s3() -> Iterator[LocalS3]:
    with LocalS3.start() as server:
        server.create_bucket(ARTIFACTS)
        server.client().create_bucket(
            Bucket=ELSEWHERE, CreateBucketConfiguration={"LocationConstraint": "eu-central-1"}
        )
        yield server


def stage(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`python -m trainer.stage` in a new process, forked from a server that has imported torch and the S3 connector
    for the first run: staging imports them for the preflight, and that import was most of each run's time."""
    return run_served("trainer.stage", args, env)


def run_args(tmp_path: Path, **flags: str) -> list[str]:
    return with_flags(
        TINY, tokenizer="byte", data_cache_dir=str(tmp_path / "cache"), checkpoint_dir=str(tmp_path / "ckpt"),
        artifacts_uri=RUN, **flags,
    )  # fmt: skip


def keys(s3: LocalS3, bucket: str) -> list[str]:
    return keys_of(s3.client(), bucket)


def keys_of(client: Any, bucket: str) -> list[str]:
    return [item["Key"] for item in client.list_objects_v2(Bucket=bucket).get("Contents", [])]


def put_checkpoint(s3: LocalS3, prefix: str, step: int, shape_name: str) -> str:
    """A complete checkpoint's meta.json (all staging reads of it) under s3://ARTIFACTS/<prefix>."""
    key = f"{prefix}/{checkpoint_name(step)}/{META_FILE}"
    meta = {"model": model_fingerprint(PRESETS[shape_name]), "step": step}
    s3.client().put_object(Bucket=ARTIFACTS, Key=key, Body=json.dumps(meta).encode())
    return f"s3://{ARTIFACTS}/{prefix}"


def test_a_bucket_that_takes_the_write_passes_and_keeps_nothing_of_the_probe(s3: LocalS3, tmp_path: Path) -> None:
    result = stage(run_args(tmp_path), s3_env(s3))
    assert result.returncode == 0, result.stderr
    assert [key for key in keys(s3, ARTIFACTS) if ".write-probe-" in key] == []


def test_a_missing_bucket_ends_staging_once_naming_it(s3: LocalS3, tmp_path: Path) -> None:
    result = stage(with_flags(run_args(tmp_path), artifacts_uri="s3://fsdp-eks-gone/run-1"), s3_env(s3))
    assert result.returncode == EXIT_STAGING_FAILED, result.stderr
    assert last_line(result) == (
        "python -m trainer.stage: error: s3://fsdp-eks-gone/run-1: NoSuchBucket: The specified bucket does not exist"
    )


def test_a_bucket_in_another_region_ends_staging_before_training_could_fail_at_its_first_save(
    s3: LocalS3, tmp_path: Path
) -> None:
    result = stage(with_flags(run_args(tmp_path), artifacts_uri=f"s3://{ELSEWHERE}/run-1"), s3_env(s3))
    assert result.returncode == EXIT_STAGING_FAILED, result.stderr
    assert last_line(result).startswith(
        f"python -m trainer.stage: error: s3://{ELSEWHERE}/run-1: the bucket is in eu-central-1, the job in us-east-1"
    )


def test_a_resume_from_without_a_complete_checkpoint_ends_staging(s3: LocalS3, tmp_path: Path) -> None:
    empty = f"s3://{ARTIFACTS}/fsdp-eks/old/run-9/checkpoints"
    s3.client().put_object(Bucket=ARTIFACTS, Key="fsdp-eks/old/run-9/checkpoints/step_00000004/.metadata", Body=b"")
    result = stage(run_args(tmp_path, resume_from=empty), s3_env(s3))
    assert result.returncode == EXIT_STAGING_FAILED, result.stderr
    assert last_line(result).startswith(
        f"python -m trainer.stage: error: --resume-from {empty}: no complete checkpoint"
    )


def test_a_resume_from_of_another_model_ends_staging(s3: LocalS3, tmp_path: Path) -> None:
    other = put_checkpoint(s3, "fsdp-eks/small/run-1/checkpoints", 6, "small")
    result = stage(run_args(tmp_path, resume_from=other), s3_env(s3))
    assert result.returncode == EXIT_STAGING_FAILED, result.stderr
    assert f"--resume-from {other}/{checkpoint_name(6)}: a checkpoint of another model (vocab_size 32000 != 260" in (
        last_line(result)
    )


def test_a_resume_from_of_this_model_passes(s3: LocalS3, tmp_path: Path) -> None:
    same = put_checkpoint(s3, "fsdp-eks/tiny/run-1/checkpoints", 8, "tiny")
    result = stage(run_args(tmp_path, resume_from=same), s3_env(s3))
    assert result.returncode == 0, result.stderr
    assert f"the run will resume from {same}/{checkpoint_name(8)}" in result.stderr


def test_a_bucket_the_pods_may_read_but_not_write_ends_staging_naming_the_connectors_error(tmp_path: Path) -> None:
    """moto with IAM checks on (as tests/trainer/test_s3_inputs.py guarded_s3): the pods' user may list the bucket and
    read, not put. The connector's CRT client, which writes every checkpoint shard, is refused at staging."""
    with guarded_s3() as guarded:
        guarded.s3.create_bucket(Bucket=ARTIFACTS)
        reader = guarded.user("reader", ["s3:GetObject", "s3:ListBucket", "s3:GetBucketLocation"])
        env = {**s3_env(guarded.server), **reader}
        result = stage(run_args(tmp_path), env)
    assert result.returncode == EXIT_STAGING_FAILED, result.stderr
    line = last_line(result)
    assert line.startswith(f"python -m trainer.stage: error: {RUN}/.write-probe-"), line
    assert "the S3 connector could not write" in line


def test_the_pods_own_policy_passes_the_preflight_with_iam_enforced(tmp_path: Path) -> None:
    """The role the stack gives the pods (infra/s3_access.py artifacts_policy: the run's prefix alone), assumed, against
    an S3 API that enforces it and answers a HEAD of a missing key 404 only to a caller who may list it."""
    with guarded_s3() as guarded:
        guarded.s3.create_bucket(Bucket=ARTIFACTS)
        pods = guarded.role_session("pods", [artifacts_policy("aws", ARTIFACTS, RUN_KEY)])
        result = stage(run_args(tmp_path), {**s3_env(guarded.server), **pods})
        left = keys_of(guarded.s3, ARTIFACTS)
    assert result.returncode == 0, result.stderr
    assert left == []  # the write probe deleted; the missing key's HEAD wrote nothing


def test_a_role_that_may_not_list_the_runs_checkpoints_ends_staging_naming_the_denied_head(tmp_path: Path) -> None:
    """The same role with ListBucket narrowed to the run's model/: every write is allowed, but S3 answers DCP's HEAD
    of a save's missing .metadata with 403, and every save would fail. Staging says so before any GPU work."""
    narrowed = json.loads(artifacts_policy("aws", ARTIFACTS, RUN_KEY))
    for statement in narrowed["Statement"]:
        if statement["Action"] == "s3:ListBucket":
            statement["Condition"] = {"StringLike": {"s3:prefix": [f"{RUN_KEY}model/*"]}}
    with guarded_s3() as guarded:
        guarded.s3.create_bucket(Bucket=ARTIFACTS)
        pods = guarded.role_session("pods", [json.dumps(narrowed)])
        result = stage(run_args(tmp_path), {**s3_env(guarded.server), **pods})
    assert result.returncode == EXIT_STAGING_FAILED, result.stderr
    line = last_line(result)
    assert line.startswith(f"python -m trainer.stage: error: {RUN}/checkpoints/.absent-probe-"), line
    assert "a HEAD of this missing key was answered" in line and "not 'not found'" in line
    assert "s3:ListBucket" in line


def test_a_resume_from_in_another_region_ends_staging(s3: LocalS3, tmp_path: Path) -> None:
    elsewhere = f"s3://{ELSEWHERE}/fsdp-eks/old/run-1/checkpoints"
    result = stage(run_args(tmp_path, resume_from=elsewhere), s3_env(s3))
    assert result.returncode == EXIT_STAGING_FAILED, result.stderr
    assert last_line(result).startswith(
        f"python -m trainer.stage: error: {elsewhere}: the bucket is in eu-central-1, the job in us-east-1"
    )
