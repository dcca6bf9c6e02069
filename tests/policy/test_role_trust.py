"""Every IAM role's trust policy admits only the stack's AWS services and an EKS OIDC provider of its own account; a
trust policy the pack cannot read is "not checked"."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pulumi_policy import ResourceValidationArgs, ResourceValidationPolicy
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

from policy.pack import POLICIES
from policy.props import NOT_CHECKED, UNKNOWN
from policy.role_trust import ROLE, SERVICE_PRINCIPALS, trust_violations
from tests.policy.engine import _opts

ACCOUNT = "123456789012"
OTHER = "210987654321"
OIDC = f"arn:aws:iam::{ACCOUNT}:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF"
CONFIGURED = {"accountIds": [ACCOUNT]}


def _statement(principal: Any, effect: str = "Allow", **more: Any) -> dict[str, Any]:
    return {"Effect": effect, "Principal": principal, "Action": "sts:AssumeRole", **more}


def _role(*statements: Any) -> dict[str, Any]:
    return {"assumeRolePolicy": json.dumps({"Version": "2012-10-17", "Statement": list(statements)})}


def _violations(props: dict[str, Any], config: dict[str, Any] | None = None) -> list[str]:
    return trust_violations(ROLE, props, config or {})


@pytest.mark.parametrize("service", sorted(SERVICE_PRINCIPALS))
def test_the_stacks_services_may_assume_its_roles(service: str) -> None:
    assert _violations(_role(_statement({"Service": service}))) == []
    assert _violations(_role(_statement({"Service": [service]}))) == []


def test_a_pod_identity_role_as_the_program_writes_it_passes() -> None:
    condition = {"StringEquals": {"aws:RequestTag/kubernetes-namespace": "kube-system"}}
    role = _role(
        {
            "Effect": "Allow",
            "Principal": {"Service": "pods.eks.amazonaws.com"},
            "Action": ["sts:AssumeRole", "sts:TagSession"],
            "Condition": condition,
        }
    )
    assert _violations(role) == []


@pytest.mark.parametrize("principal", ["*", {"AWS": "*"}, {"AWS": ["*"]}, {"Federated": "*"}, {"Service": "*"}])
def test_anyone_fails(principal: Any) -> None:
    (problem,) = _violations(_role(_statement(principal)), CONFIGURED)
    assert "'*'" in problem and not problem.startswith(NOT_CHECKED)


@pytest.mark.parametrize(
    "principal",
    [
        f"arn:aws:iam::{OTHER}:root",
        OTHER,
        f"arn:aws:iam::{OTHER}:role/ci",
        f"arn:aws:iam::{ACCOUNT}:root",  # the program needs no account principal, its own included
        f"arn:aws:iam::{ACCOUNT}:role/admin",
    ],
)
def test_account_user_and_role_principals_fail(principal: str) -> None:
    (problem,) = _violations(_role(_statement({"AWS": principal})), CONFIGURED)
    assert principal in problem and not problem.startswith(NOT_CHECKED)


def test_a_service_outside_the_list_fails() -> None:
    (problem,) = _violations(_role(_statement({"Service": "lambda.amazonaws.com"})))
    assert "lambda.amazonaws.com" in problem


def test_one_bad_principal_among_good_ones_fails() -> None:
    role = _role(_statement({"Service": ["ec2.amazonaws.com"], "AWS": f"arn:aws:iam::{OTHER}:root"}))
    (problem,) = _violations(role)
    assert OTHER in problem and "statement 0" in problem


def test_the_clusters_oidc_provider_in_this_account_passes() -> None:
    assert _violations(_role(_statement({"Federated": OIDC})), CONFIGURED) == []


def test_an_oidc_provider_of_another_account_fails() -> None:
    (problem,) = _violations(_role(_statement({"Federated": OIDC.replace(ACCOUNT, OTHER)})), CONFIGURED)
    assert OTHER in problem and not problem.startswith(NOT_CHECKED)


def test_a_federated_principal_that_is_not_an_eks_oidc_provider_fails() -> None:
    github = f"arn:aws:iam::{ACCOUNT}:oidc-provider/token.actions.githubusercontent.com"
    (problem,) = _violations(_role(_statement({"Federated": github})), CONFIGURED)
    assert "not an EKS cluster's OIDC provider" in problem


def test_without_the_stacks_account_an_oidc_provider_is_not_checked() -> None:
    (problem,) = _violations(_role(_statement({"Federated": OIDC})))
    assert problem.startswith(NOT_CHECKED) and "accountIds" in problem


def test_allow_with_not_principal_fails() -> None:
    statement = {"Effect": "Allow", "NotPrincipal": {"AWS": f"arn:aws:iam::{OTHER}:root"}, "Action": "sts:AssumeRole"}
    (problem,) = _violations(_role(statement))
    assert "NotPrincipal" in problem


def test_a_deny_may_name_anyone() -> None:
    role = _role(_statement({"Service": "ec2.amazonaws.com"}), _statement("*", effect="Deny"))
    assert _violations(role) == []


def test_a_trust_policy_given_as_an_object_is_read_too() -> None:
    document = {"Statement": _statement({"AWS": f"arn:aws:iam::{OTHER}:root"})}
    assert len(_violations({"assumeRolePolicy": document})) == 1


def test_a_trust_policy_unknown_during_preview_is_not_checked() -> None:
    (problem,) = _violations({"assumeRolePolicy": UNKNOWN})
    assert problem.startswith(NOT_CHECKED) and "assumeRolePolicy" in problem


def test_of_a_partly_known_trust_policy_the_known_principals_are_checked() -> None:
    """A document given as an object can be partly unknown: its known principals are judged, an unknown one is
    reported as not checked."""
    known = {"Statement": [_statement({"Service": "ec2.amazonaws.com", "AWS": UNKNOWN})]}
    (problem,) = _violations({"assumeRolePolicy": known})
    assert problem.startswith(NOT_CHECKED) and "statement 0: a principal of kind AWS is unknown" in problem
    bad = {"Statement": [_statement({"Service": "lambda.amazonaws.com", "AWS": UNKNOWN})]}
    assert sorted(p.startswith(NOT_CHECKED) for p in _violations({"assumeRolePolicy": bad})) == [False, True]
    unknown_condition = {"Statement": [_statement({"Service": "ec2.amazonaws.com"}, Condition=UNKNOWN)]}
    assert _violations({"assumeRolePolicy": unknown_condition}) == []
    (problem,) = _violations({"assumeRolePolicy": {"Statement": [_statement(UNKNOWN)]}})
    assert problem.startswith(NOT_CHECKED) and "Principal" in problem


@pytest.mark.parametrize("props", [{}, {"assumeRolePolicy": "not json"}, {"assumeRolePolicy": json.dumps([1])}])
def test_a_missing_or_unreadable_trust_policy_is_not_checked(props: dict) -> None:
    (problem,) = _violations(props)
    assert problem.startswith(NOT_CHECKED)


def test_other_resources_are_not_this_policys_business() -> None:
    assert trust_violations("aws:iam/policy:Policy", {"policy": "*"}, {}) == []


def test_the_pack_takes_the_account_from_its_config() -> None:
    """Through the SDK: the policy's config reaches the check, and an unknown trust policy arrives as the sentinel."""
    policy = next(p for p in POLICIES if p.name == "role-trust-within-account")
    assert isinstance(policy, ResourceValidationPolicy)

    def run(props: dict[str, Any], config: dict[str, Any]) -> list[str]:
        found: list[str] = []
        args = ResourceValidationArgs(ROLE, unknown_checking_proxy(props), "urn", "r", _opts(), None, config)
        policy.validate(args, lambda message, urn=None: found.append(message))
        return found

    role = _role(_statement({"Federated": OIDC}))
    assert run(role, CONFIGURED) == []
    assert run(role, {})[0].startswith(NOT_CHECKED)
    assert run({"assumeRolePolicy": UNKNOWN_STRING_VALUE}, CONFIGURED)[0].startswith(NOT_CHECKED)
