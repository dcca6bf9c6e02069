"""Every IAM role the stack creates carries the permissions boundary the deploy role demands, when the stack names
one (fsdp-eks:cluster.rolePermissionsBoundary): the program registers a stack transform, which the engine runs on
every registration, pulumi-eks's children included."""

from __future__ import annotations

import pulumi

from ci.deploy_policy import Account
from infra.role_boundary import ROLE, role_with_boundary
from tests.harness.pulumi_program import run_program

BOUNDARY = Account("123456789012").boundary_arn
WITH_BOUNDARY = {"fsdp-eks:cluster": {"rolePermissionsBoundary": BOUNDARY}}


def _transform(type_token: str, props: dict) -> pulumi.ResourceTransformResult | None:
    return role_with_boundary(
        pulumi.ResourceTransformArgs(True, type_token, "x", props, pulumi.ResourceOptions()), BOUNDARY
    )


def test_a_role_gets_the_boundary_and_keeps_its_properties() -> None:
    result = _transform(ROLE, {"assumeRolePolicy": "{}", "description": "Allows EKS to manage clusters"})
    assert result is not None
    assert result.props == {
        "assumeRolePolicy": "{}",
        "description": "Allows EKS to manage clusters",
        "permissionsBoundary": BOUNDARY,
    }


def test_other_resources_are_left_as_they_are() -> None:
    assert _transform("aws:iam/rolePolicyAttachment:RolePolicyAttachment", {"role": "r"}) is None
    assert _transform("eks:index:Cluster", {}) is None


def test_every_role_of_the_program_carries_the_boundary_when_the_stack_names_one() -> None:
    for preview in ("first", "update"):
        run = run_program("p5-16", WITH_BOUNDARY, preview=preview)
        assert run.error is None, run.error
        roles = run.of_type(ROLE)
        assert roles and all(r.inputs.get("permissionsBoundary") == BOUNDARY for r in roles), preview


def test_without_the_setting_no_role_gets_a_boundary() -> None:
    run = run_program("p5-16", preview="first")
    assert run.error is None, run.error
    assert all("permissionsBoundary" not in r.inputs for r in run.of_type(ROLE))


def test_a_boundary_that_is_not_a_policy_arn_is_refused() -> None:
    run = run_program("p5-2", {"fsdp-eks:cluster": {"rolePermissionsBoundary": "fsdp-eks-role-boundary"}})
    assert run.error is not None and run.error["kind"] == "ConfigError"
    assert "cluster.rolePermissionsBoundary" in run.error["message"]
