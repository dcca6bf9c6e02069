"""No bucket policy allows a principal outside the stack's account (policy/s3_grants.py): another account by id or
ARN, '*' or a service not pinned to the stack's account, NotPrincipal, principals whose account cannot be read. A
document unknown at preview is judged at `up`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.artifacts import tls_only_policy
from policy.props import NOT_CHECKED, UNKNOWN
from policy.s3_grants import BUCKET, BUCKET_POLICY, cross_account_violations

ACCOUNT = "123456789012"
OTHER = "210987654321"
CONFIGURED = {"accountIds": [ACCOUNT]}


def _policy(principal: Any, condition: dict[str, Any] | None = None, effect: str = "Allow") -> dict[str, Any]:
    statement: dict[str, Any] = {"Effect": effect, "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*"}
    statement |= {"NotPrincipal": principal} if effect == "NotAllow" else {"Principal": principal}
    if effect == "NotAllow":
        statement["Effect"] = "Allow"
    if condition:
        statement["Condition"] = condition
    return {"policy": json.dumps({"Version": "2012-10-17", "Statement": [statement]})}


def _violations(props: dict[str, Any], config: dict[str, Any] | None = CONFIGURED) -> list[str]:
    return cross_account_violations(BUCKET_POLICY, props, config or {})


def test_the_stacks_own_tls_only_policy_passes() -> None:
    assert _violations({"policy": tls_only_policy("arn:aws:s3:::fsdp-eks-dev-artifacts-x")}) == []


@pytest.mark.parametrize(
    "principal",
    [ACCOUNT, f"arn:aws:iam::{ACCOUNT}:root", f"arn:aws:iam::{ACCOUNT}:role/fsdp-eks/job-role"],
)
def test_principals_of_the_stacks_account_pass(principal: str) -> None:
    assert _violations(_policy({"AWS": principal})) == []


@pytest.mark.parametrize(
    "principal",
    [OTHER, f"arn:aws:iam::{OTHER}:root", f"arn:aws:sts::{OTHER}:assumed-role/reader/session"],
)
def test_a_principal_of_another_account_is_refused_naming_it(principal: str) -> None:
    (problem,) = _violations(_policy({"AWS": [f"arn:aws:iam::{ACCOUNT}:root", principal]}))
    assert OTHER in problem and "outside the stack's" in problem


def test_everyone_pinned_to_the_stacks_account_passes_and_to_another_is_refused() -> None:
    assert _violations(_policy("*", {"StringEquals": {"aws:PrincipalAccount": ACCOUNT}})) == []
    (problem,) = _violations(_policy("*", {"StringEquals": {"aws:PrincipalAccount": [ACCOUNT, OTHER]}}))
    assert OTHER in problem


@pytest.mark.parametrize(
    "condition",
    [
        None,
        {"StringEquals": {"aws:SourceVpce": "vpce-0123"}},  # any account's principal inside that endpoint's VPC
        {"StringLike": {"aws:PrincipalAccount": "1234*"}},  # a wildcard matches other accounts
        {"StringNotEquals": {"aws:PrincipalAccount": OTHER}},  # everyone but one
    ],
)
def test_everyone_not_pinned_exactly_to_an_account_is_refused(condition: dict[str, Any] | None) -> None:
    (problem,) = _violations(_policy("*", condition))
    assert "without a condition that pins the caller's account" in problem


def test_a_service_acts_for_the_stacks_account_only_when_pinned_to_it() -> None:
    service = {"Service": "logging.s3.amazonaws.com"}
    assert _violations(_policy(service, {"StringEquals": {"aws:SourceAccount": ACCOUNT}})) == []
    (problem,) = _violations(_policy(service))
    assert "logging.s3.amazonaws.com" in problem


@pytest.mark.parametrize(
    ("principal", "effect"),
    [
        ({"AWS": f"arn:aws:iam::{ACCOUNT}:root"}, "NotAllow"),  # NotPrincipal: everyone but this
        ({"Federated": "cognito-identity.amazonaws.com"}, "Allow"),
        ({"CanonicalUser": "79a59df900b949e55d96a1e698fbacedfd6e09d98eacf8f8d5218e7cd47ef2be"}, "Allow"),
        ({"AWS": "AIDAJQABLZS4A3QDU576Q"}, "Allow"),  # a unique id: no account to read
    ],
)
def test_principals_whose_account_the_pack_cannot_read_are_refused(principal: dict[str, Any], effect: str) -> None:
    assert len(_violations(_policy(principal, effect=effect))) == 1


def test_a_deny_is_never_refused() -> None:
    assert _violations(_policy({"AWS": f"arn:aws:iam::{OTHER}:root"}, effect="Deny")) == []


def test_without_the_stacks_account_a_named_account_is_not_checked() -> None:
    (problem,) = _violations(_policy({"AWS": f"arn:aws:iam::{ACCOUNT}:root"}), config=None)
    assert problem.startswith(NOT_CHECKED) and "accountIds" in problem


def test_a_buckets_inline_policy_is_judged_too() -> None:
    inline = _policy({"AWS": OTHER})
    assert cross_account_violations(BUCKET, inline, CONFIGURED)
    assert cross_account_violations("aws:s3/bucketAcl:BucketAcl", inline, CONFIGURED) == []


def test_a_document_unknown_during_the_preview_waits_for_up_where_it_is_known() -> None:
    """The stack's own TLS-only policy is built from the bucket's ARN: unknown on a first preview. The engine runs
    per-resource policies again at `up`, immediately before the BucketPolicy is created, with the document known."""
    assert _violations({"policy": UNKNOWN}) == []
    assert _violations({"policy": {"Version": "2012-10-17", "Statement": [UNKNOWN]}}) == []
    assert _violations({"policy": "{not json"}) == ["the bucket policy is not JSON, so whom it allows cannot be read"]
