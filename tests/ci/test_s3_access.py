"""S3 through the CI roles, asked concrete questions (tests/ci/iam_eval.py): the deploy role creates, configures and
reads back only the stacks' artifacts buckets of its account and never deletes one or touches an object; the
boundary caps every stack role at the artifacts actions on those buckets and a read of the data buckets the account
registers (python -m ci --data-bucket)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci.__main__ import main
from ci.deploy_policy import BUCKET_READS, BUCKET_WRITES, Account, deploy_policy
from ci.role_boundary import ARTIFACT_BUCKET_ACTIONS, ARTIFACT_OBJECT_ACTIONS, DATA_READ_ACTIONS, role_boundary
from stack.names import STACK_TAG_KEY, artifacts_bucket_prefix
from tests.ci.iam_eval import allowed

ACCOUNT = Account("123456789012", data_buckets=("acme-datasets",))
DEPLOY = deploy_policy(ACCOUNT)
BOUNDARY = role_boundary(ACCOUNT.account_id, ACCOUNT.partition, ACCOUNT.data_buckets)
THIS_ACCOUNT = {"s3:ResourceAccount": ACCOUNT.account_id}
ANOTHER_ACCOUNT = {"s3:ResourceAccount": "210987654321"}
STACK_BUCKET = "fsdp-eks-dev-artifacts-abc1234"
RUN_OBJECT = f"{STACK_BUCKET}/runs/dev/run-3/checkpoints/step_200/__0_0.distcp"
STACK_ROLE = ACCOUNT.arn("role", "fsdp-eks/job-artifacts-1a2b3c")
STACK_POLICY = ACCOUNT.arn("policy", "fsdp-eks/job-artifacts-1a2b3c")


def s3(resource: str) -> str:
    return f"arn:aws:s3:::{resource}"


# --- the deploy role ------------------------------------------------------------------------------------------


def test_the_stacks_own_bucket_name_is_one_the_deploy_role_creates() -> None:
    """The program's bucket_prefix (stack/names.py), plus the random suffix Pulumi's autonaming adds."""
    name = f"{artifacts_bucket_prefix('dev')}abc1234"
    assert allowed(DEPLOY, "s3:CreateBucket", s3(name), THIS_ACCOUNT)


@pytest.mark.parametrize("action", BUCKET_WRITES)
def test_the_deploy_role_creates_and_configures_the_stacks_bucket(action: str) -> None:
    assert allowed(DEPLOY, action, s3(STACK_BUCKET), THIS_ACCOUNT)


@pytest.mark.parametrize("action", BUCKET_READS)
def test_the_deploy_role_reads_back_what_pulumi_aws_reads(action: str) -> None:
    assert allowed(DEPLOY, action, s3(STACK_BUCKET), THIS_ACCOUNT)


@pytest.mark.parametrize(
    "actions",
    [
        ("s3:TagResource", "s3:UntagResource", "s3:ListTagsForResource"),  # pulumi-aws 7's first choice (S3 Control)
        ("s3:PutBucketTagging", "s3:GetBucketTagging"),  # its fallback, which fails where buckets use ABAC
    ],
)
def test_the_deploy_role_tags_the_stacks_bucket_either_way_pulumi_aws_tries(actions: tuple[str, ...]) -> None:
    assert all(allowed(DEPLOY, action, s3(STACK_BUCKET), THIS_ACCOUNT) for action in actions)


@pytest.mark.parametrize("bucket", ["other-bucket", "payments-fsdp-eks-dev", "pulumi-state"])
def test_the_deploy_role_creates_or_configures_no_other_bucket(bucket: str) -> None:
    for action in (
        "s3:CreateBucket", "s3:PutBucketPolicy", "s3:PutBucketPublicAccessBlock", "s3:GetBucketPolicy", "s3:TagResource"
    ):  # fmt: skip
        assert not allowed(DEPLOY, action, s3(bucket), THIS_ACCOUNT), (action, bucket)


def test_a_bucket_so_named_in_another_account_is_out_of_reach() -> None:
    """A bucket's ARN names no account: s3:ResourceAccount keeps `fsdp-eks-*` to this account's buckets."""
    for action in ("s3:PutBucketPolicy", "s3:GetBucketPolicy", "s3:PutBucketTagging"):
        assert not allowed(DEPLOY, action, s3(STACK_BUCKET), ANOTHER_ACCOUNT), action
        assert not allowed(DEPLOY, action, s3(STACK_BUCKET)), action


@pytest.mark.parametrize("action", ["s3:DeleteBucket", "s3:DeleteBucketPolicy", "s3:PutBucketAcl", "s3:PutObjectAcl"])
def test_the_deploy_role_never_deletes_the_bucket_or_writes_an_acl(action: str) -> None:
    assert not allowed(DEPLOY, action, s3(STACK_BUCKET), THIS_ACCOUNT)
    assert not allowed(DEPLOY, action, s3(f"{STACK_BUCKET}/model/config.json"), THIS_ACCOUNT)


@pytest.mark.parametrize("action", ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:GetObjectVersion"])
@pytest.mark.parametrize("resource", [RUN_OBJECT, "acme-datasets/corpus.jsonl", "pulumi-state/.pulumi/stacks/x"])
def test_the_deploy_role_reads_and_writes_no_object(action: str, resource: str) -> None:
    assert not allowed(DEPLOY, action, s3(resource), THIS_ACCOUNT)


def test_a_bucket_policy_the_deploy_role_writes_cannot_grant_it_object_access() -> None:
    """In one account a bucket policy's Allow suffices on its own (IAM User Guide, "Policy evaluation logic"): the
    deploy role's explicit Deny is what keeps a hostile plan's bucket policy from handing it the model."""
    granted_by_the_bucket = {
        "Effect": "Allow",
        "Action": "s3:*",
        "Resource": [s3(STACK_BUCKET), s3(f"{STACK_BUCKET}/*")],
    }
    both = {"Statement": [*DEPLOY["Statement"], granted_by_the_bucket]}
    for action in ("s3:GetObject", "s3:PutObject", "s3:DeleteObjectVersion"):
        assert not allowed(both, action, s3(RUN_OBJECT), THIS_ACCOUNT), action
    assert allowed(both, "s3:PutBucketVersioning", s3(STACK_BUCKET), THIS_ACCOUNT)  # the bucket's own stays


def test_the_deploy_role_is_granted_no_s3_wildcard() -> None:
    granted = [a for s in DEPLOY["Statement"] if s["Effect"] == "Allow" for a in _as_list(s.get("Action", []))]
    assert not [a for a in granted if a.startswith("s3:") and "*" in a]


def test_the_deploy_role_creates_and_attaches_the_pods_s3_policy() -> None:
    """The pods' bucket policy is a customer managed policy under IAM_PATH: the IAM statements cover it."""
    assert allowed(DEPLOY, "iam:CreatePolicy", STACK_POLICY, {f"aws:RequestTag/{STACK_TAG_KEY}": "dev"})
    attach = {"iam:PolicyARN": STACK_POLICY, "iam:PermissionsBoundary": ACCOUNT.boundary_arn}
    assert allowed(DEPLOY, "iam:AttachRolePolicy", STACK_ROLE, attach)


# --- the boundary ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("action", ARTIFACT_OBJECT_ACTIONS)
def test_a_stack_role_may_do_the_jobs_object_actions_in_the_stacks_buckets(action: str) -> None:
    assert allowed(BOUNDARY, action, s3(RUN_OBJECT), THIS_ACCOUNT)


@pytest.mark.parametrize("action", ARTIFACT_BUCKET_ACTIONS)
def test_a_stack_role_may_list_and_locate_the_stacks_buckets(action: str) -> None:
    assert allowed(BOUNDARY, action, s3(STACK_BUCKET), {**THIS_ACCOUNT, "s3:prefix": "runs/dev/"})


@pytest.mark.parametrize("action", ARTIFACT_OBJECT_ACTIONS)
@pytest.mark.parametrize("bucket", ["other-bucket", "pulumi-state", "team-fsdp-eks-models"])
def test_a_stack_role_gets_nothing_in_other_buckets(action: str, bucket: str) -> None:
    assert not allowed(BOUNDARY, action, s3(f"{bucket}/model/model.safetensors"), THIS_ACCOUNT)


def test_a_stack_role_reaches_no_bucket_so_named_in_another_account() -> None:
    """Else a hostile plan's policy could copy the model to a bucket named fsdp-eks-* that someone else owns."""
    assert not allowed(BOUNDARY, "s3:PutObject", s3(RUN_OBJECT), ANOTHER_ACCOUNT)
    assert not allowed(BOUNDARY, "s3:PutObject", s3(RUN_OBJECT))


@pytest.mark.parametrize("action", DATA_READ_ACTIONS)
def test_a_registered_data_bucket_is_read(action: str) -> None:
    resource = "acme-datasets/chat/train.jsonl" if action == "s3:GetObject" else "acme-datasets"
    assert allowed(BOUNDARY, action, s3(resource), ANOTHER_ACCOUNT)  # a data set may live in another account


@pytest.mark.parametrize("action", ["s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:PutBucketPolicy"])
def test_a_registered_data_bucket_is_never_written(action: str) -> None:
    assert not allowed(BOUNDARY, action, s3("acme-datasets/chat/train.jsonl"), THIS_ACCOUNT)
    assert not allowed(BOUNDARY, action, s3("acme-datasets"), THIS_ACCOUNT)


def test_only_registered_data_buckets_are_read() -> None:
    unregistered = role_boundary(ACCOUNT.account_id, ACCOUNT.partition)
    assert not allowed(unregistered, "s3:GetObject", s3("acme-datasets/chat/train.jsonl"))
    assert not allowed(BOUNDARY, "s3:GetObject", s3("acme-datasets-2/chat/train.jsonl"))
    assert not allowed(BOUNDARY, "s3:GetObject", s3("acme/chat/train.jsonl"))


def test_s3_stays_out_of_the_boundarys_unscoped_statement() -> None:
    unscoped = [s for s in BOUNDARY["Statement"] if s.get("Resource") == "*" and s["Effect"] == "Allow"]
    assert unscoped and not [a for s in unscoped for a in _as_list(s["Action"]) if a.startswith("s3:")]


def test_the_boundary_with_data_buckets_fits_a_managed_policy() -> None:
    many = role_boundary(ACCOUNT.account_id, ACCOUNT.partition, [f"team-{i:02d}-datasets" for i in range(20)])
    assert len(json.dumps(many, separators=(",", ":"))) <= 6_144


# --- python -m ci --data-bucket -------------------------------------------------------------------------------

SETUP = ["--repository", "acme/fsdp-eks", "--account-id", "123456789012", "--reviewer", "Team:42", "--pulumi-org", "a"]


def test_the_setup_command_grants_each_data_bucket_in_the_boundary(tmp_path: Path, capsys) -> None:
    assert main([*SETUP, "--data-bucket", "acme-datasets", "--data-bucket", "acme-models", "--out", str(tmp_path)]) == 0
    boundary = json.loads((tmp_path / "role-boundary-policy.json").read_text())
    for bucket in ("acme-datasets", "acme-models"):
        assert allowed(boundary, "s3:GetObject", s3(f"{bucket}/x.jsonl"))
        assert not allowed(boundary, "s3:PutObject", s3(f"{bucket}/x.jsonl"))
    assert "--data-bucket" in capsys.readouterr().out


@pytest.mark.parametrize("bucket", ["s3://acme-datasets", "Acme", "ab"])
def test_the_setup_command_refuses_what_is_not_a_bucket_name(bucket: str, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*SETUP, "--data-bucket", bucket, "--out", str(tmp_path)])
    assert exited.value.code == 2 and "--data-bucket" in capsys.readouterr().err
    assert not (tmp_path / "role-boundary-policy.json").exists()


def _as_list(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]
