"""The request-level IAM model (tests/ci/iam_request.py), checked against the rules of the IAM user guide ("Policy
evaluation logic", "Cross-account policy evaluation logic") and the AWS Organizations user guide ("RCP syntax")."""

from __future__ import annotations

from typing import Any

import pytest

from tests.ci.iam_request import Caller, check_rcp, request_allowed

HERE, THERE = "111111111111", "222222222222"
OBJECT = "arn:aws:s3:::bucket/key"
READ_ALL = {"Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
LOCAL = Caller(f"arn:aws:iam::{HERE}:role/local", (READ_ALL,))
LOCAL_WITHOUT_POLICY = Caller(f"arn:aws:iam::{HERE}:role/bare")
OUTSIDER = Caller(f"arn:aws:iam::{THERE}:role/outsider", (READ_ALL,))
OUTSIDER_WITHOUT_POLICY = Caller(f"arn:aws:iam::{THERE}:role/bare")


def _bucket_policy(principal: Any, effect: str = "Allow", condition: dict[str, Any] | None = None) -> dict[str, Any]:
    statement = {"Effect": effect, "Principal": principal, "Action": "s3:GetObject", "Resource": OBJECT}
    return {"Statement": [statement | ({"Condition": condition} if condition else {})]}


def _allowed(caller: Caller, policy: dict[str, Any] | None = None, **kwargs: Any) -> bool:
    return request_allowed(caller, "s3:GetObject", OBJECT, HERE, resource_policy=policy, **kwargs)


def test_in_the_resources_account_an_identity_policy_alone_is_enough() -> None:
    assert _allowed(LOCAL)
    assert not _allowed(LOCAL_WITHOUT_POLICY)


def test_in_the_resources_account_a_resource_policy_naming_the_role_is_enough() -> None:
    assert _allowed(LOCAL_WITHOUT_POLICY, _bucket_policy({"AWS": LOCAL_WITHOUT_POLICY.arn}))


def test_a_resource_policy_naming_the_account_delegates_to_its_identity_policies() -> None:
    assert not _allowed(LOCAL_WITHOUT_POLICY, _bucket_policy({"AWS": HERE}))
    assert _allowed(LOCAL, _bucket_policy({"AWS": f"arn:aws:iam::{HERE}:root"}))


@pytest.mark.parametrize("principal", [{"AWS": THERE}, {"AWS": f"arn:aws:iam::{THERE}:root"}, "*"])
def test_another_account_needs_the_resource_policy_and_its_own_identity_policy(principal: Any) -> None:
    assert not _allowed(OUTSIDER)
    assert not _allowed(OUTSIDER_WITHOUT_POLICY, _bucket_policy(principal))
    assert _allowed(OUTSIDER, _bucket_policy(principal))


def test_a_deny_in_the_resource_policy_wins_over_the_identity_policy() -> None:
    tls_only = _bucket_policy("*", "Deny", {"Bool": {"aws:SecureTransport": "false"}})
    assert not _allowed(LOCAL, tls_only, context={"aws:SecureTransport": "false"})
    assert _allowed(LOCAL, tls_only, context={"aws:SecureTransport": "true"})


def test_a_service_principal_is_allowed_only_where_the_resource_policy_names_it() -> None:
    service = Caller(service="logging.s3.amazonaws.com", source_account=HERE)
    assert not _allowed(service)
    assert not _allowed(service, _bucket_policy({"Service": "cloudtrail.amazonaws.com"}))
    assert _allowed(service, _bucket_policy({"Service": "logging.s3.amazonaws.com"}))


def test_an_anonymous_request_is_allowed_only_by_everyone() -> None:
    assert not _allowed(Caller(), _bucket_policy({"AWS": HERE}))
    assert _allowed(Caller(), _bucket_policy("*"))


def test_the_caller_context_carries_the_principal_keys() -> None:
    assert LOCAL.context() == {
        "aws:PrincipalArn": LOCAL.arn,
        "aws:PrincipalAccount": HERE,
        "aws:PrincipalIsAWSService": "false",
    }
    assert Caller(service="s.amazonaws.com", source_account=THERE).context() == {
        "aws:PrincipalIsAWSService": "true",
        "aws:SourceAccount": THERE,
    }
    assert Caller().context() == {}


def test_an_rcp_deny_wins_over_every_allow() -> None:
    rcp = {"Statement": [{"Effect": "Deny", "Principal": "*", "Action": "s3:*", "Resource": "*"}]}
    assert not _allowed(LOCAL, _bucket_policy({"AWS": LOCAL.arn}), rcps=[rcp])


@pytest.mark.parametrize(
    "statement,problem",
    [
        ({"Effect": "Allow", "Principal": "*", "Action": "s3:*", "Resource": "*"}, "only deny"),
        ({"Effect": "Deny", "Principal": {"AWS": THERE}, "Action": "s3:*", "Resource": "*"}, "Principal"),
        ({"Effect": "Deny", "Principal": "*", "NotAction": "s3:GetObject", "Resource": "*"}, "NotAction"),
        ({"Effect": "Deny", "NotPrincipal": {"AWS": HERE}, "Action": "s3:*", "Resource": "*"}, "NotPrincipal"),
    ],
)
def test_an_rcp_that_organizations_would_refuse_is_refused(statement: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        check_rcp({"Statement": [statement]})


@pytest.mark.parametrize("principal", [{"Federated": "cognito-identity.amazonaws.com"}, {"AWS": "*"}, {"AWS": "x"}])
def test_a_principal_form_it_does_not_know_is_refused_not_guessed(principal: Any) -> None:
    with pytest.raises(ValueError, match="not modelled"):
        _allowed(LOCAL, _bucket_policy(principal))
