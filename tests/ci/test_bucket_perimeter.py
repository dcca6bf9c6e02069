"""The resource control policy over the stacks' buckets (ci/bucket_perimeter.py), asked concrete questions through the
request-level IAM model (tests/ci/iam_request.py): a bucket policy the deploy role may write that grants another
account is inert under it; the stack's own pods and the deploy role keep what they need."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ci.bucket_perimeter import bucket_perimeter_policy
from ci.deploy_policy import BUCKET_READS, BUCKET_WRITES, Account, deploy_policy
from infra.artifacts import bucket_arn, tls_only_policy
from infra.s3_access import artifacts_policy
from stack.artifacts import DEFAULT_PREFIX, run_key
from tests.ci.iam_request import Caller, check_rcp, request_allowed
from trainer.base.s3.run_layout import MODEL_DIRECTORY

ACCOUNT = Account("123456789012")
OTHER_ACCOUNT = "210987654321"
RCP = bucket_perimeter_policy(ACCOUNT)
BUCKET = "fsdp-eks-dev-artifacts-abc1234"  # a kept one looks the same: a name, a tag, no stack behind it
RUN = run_key(DEFAULT_PREFIX, "dev", 3)
MODEL = f"{bucket_arn('aws', BUCKET)}/{RUN}{MODEL_DIRECTORY}/model.safetensors"
OVER_TLS = {"aws:SecureTransport": "true", "s3:ResourceAccount": ACCOUNT.account_id}

DEPLOY_ROLE = Caller(ACCOUNT.arn("role", ACCOUNT.deploy_role), (deploy_policy(ACCOUNT),))
PODS_ROLE = Caller(
    ACCOUNT.arn("role", "fsdp-eks/job-artifacts-1a2b3c"), (json.loads(artifacts_policy("aws", BUCKET, RUN)),)
)
EVERYTHING = {"Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
OUTSIDER = Caller(f"arn:aws:iam::{OTHER_ACCOUNT}:role/reader", (EVERYTHING,))


def _policy_granting(principal: Any, bucket: str = BUCKET) -> dict[str, Any]:
    """The bucket's own TLS-only policy with a grant added, as a deploy session could write it."""
    arn = bucket_arn("aws", bucket)
    policy = json.loads(tls_only_policy(arn))
    policy["Statement"].append(
        {"Effect": "Allow", "Principal": principal, "Action": "s3:*", "Resource": [arn, f"{arn}/*"]}
    )
    return policy


def _request(caller: Caller, action: str, resource: str, policy: dict[str, Any], *, perimeter: bool) -> bool:
    return request_allowed(
        caller,
        action,
        resource,
        ACCOUNT.account_id,
        resource_policy=policy,
        rcps=[RCP] if perimeter else [],
        context=OVER_TLS,
    )


def test_the_deploy_role_may_write_such_a_policy_so_iam_alone_does_not_hold_it() -> None:
    assert _request(DEPLOY_ROLE, "s3:PutBucketPolicy", bucket_arn("aws", BUCKET), {"Statement": []}, perimeter=True)


@pytest.mark.parametrize(
    "action,resource",
    [
        ("s3:GetObject", MODEL),
        ("s3:PutObject", MODEL),
        ("s3:DeleteObject", MODEL),
        ("s3:ListBucket", bucket_arn("aws", BUCKET)),
        ("s3:PutBucketPolicy", bucket_arn("aws", BUCKET)),
    ],
)
@pytest.mark.parametrize("principal", [{"AWS": OTHER_ACCOUNT}, {"AWS": OUTSIDER.arn}, "*"])
def test_a_grant_to_another_account_is_inert_under_the_perimeter(action: str, resource: str, principal: Any) -> None:
    policy = _policy_granting(principal)
    assert _request(OUTSIDER, action, resource, policy, perimeter=False), "the grant is real without it"
    assert not _request(OUTSIDER, action, resource, policy, perimeter=True)


@pytest.mark.parametrize(
    "action,resource,context",
    [
        ("s3:PutObject", MODEL, {}),
        ("s3:GetObject", MODEL, {}),
        ("s3:ListBucket", bucket_arn("aws", BUCKET), {"s3:prefix": f"{RUN}checkpoints/"}),
        ("s3:GetBucketLocation", bucket_arn("aws", BUCKET), {}),
    ],
)
def test_the_stacks_pods_keep_their_run(action: str, resource: str, context: dict[str, str]) -> None:
    policy = json.loads(tls_only_policy(bucket_arn("aws", BUCKET)))
    assert request_allowed(
        PODS_ROLE, action, resource, ACCOUNT.account_id, resource_policy=policy, rcps=[RCP], context=OVER_TLS | context
    )


@pytest.mark.parametrize("action", [*BUCKET_WRITES, *BUCKET_READS])
def test_the_deploy_role_keeps_configuring_and_reading_the_bucket(action: str) -> None:
    policy = json.loads(tls_only_policy(bucket_arn("aws", BUCKET)))
    assert _request(DEPLOY_ROLE, action, bucket_arn("aws", BUCKET), policy, perimeter=True)


def test_a_service_acting_for_another_account_is_denied_and_one_acting_for_this_account_is_not() -> None:
    policy = _policy_granting({"Service": "cloudtrail.amazonaws.com"})
    for_other = Caller(service="cloudtrail.amazonaws.com", source_account=OTHER_ACCOUNT)
    for_us = Caller(service="cloudtrail.amazonaws.com", source_account=ACCOUNT.account_id)
    assert _request(for_other, "s3:PutObject", MODEL, policy, perimeter=False)
    assert not _request(for_other, "s3:PutObject", MODEL, policy, perimeter=True)
    assert _request(for_us, "s3:PutObject", MODEL, policy, perimeter=True)


@pytest.mark.parametrize(
    "anonymous",
    [Caller(), Caller(extra_context={"aws:PrincipalAccount": "anonymous"})],
    ids=["no-principal-keys", "principal-account-anonymous"],
)
def test_an_anonymous_request_is_denied_whichever_way_its_context_reads(anonymous: Caller) -> None:
    """The IAM user guide has said both: anonymous requests carry no aws:PrincipalAccount, or carry "anonymous"."""
    policy = _policy_granting("*")
    assert _request(anonymous, "s3:GetObject", MODEL, policy, perimeter=False)
    assert not _request(anonymous, "s3:GetObject", MODEL, policy, perimeter=True)


def test_buckets_outside_the_stacks_names_are_left_to_their_owners() -> None:
    data_bucket = "acme-datasets"
    policy = _policy_granting({"AWS": OTHER_ACCOUNT}, data_bucket)
    resource = f"{bucket_arn('aws', data_bucket)}/train.jsonl"
    assert _request(OUTSIDER, "s3:GetObject", resource, policy, perimeter=True)


def test_it_is_an_rcp_organizations_accepts_and_names_this_account() -> None:
    check_rcp(RCP)
    conditions = json.dumps([s["Condition"] for s in RCP["Statement"]])
    assert ACCOUNT.account_id in conditions and OTHER_ACCOUNT not in conditions
