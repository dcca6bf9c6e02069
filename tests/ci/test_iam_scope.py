"""Every IAM role and customer managed policy the stack registers lives under IAM_PATH with the stack's tag, and every
role carries the permissions boundary when the stack names one (fsdp-eks:cluster.rolePermissionsBoundary): the
program registers a stack transform (infra/iam_scope.py), which the engine runs on every registration, pulumi-eks's
children included."""

from __future__ import annotations

import json

import pulumi
import pytest

from ci.deploy_policy import Account
from infra.iam_scope import POLICY, ROLE, IamScope, scoped_iam, scoped_props
from stack.names import IAM_PATH, STACK_TAG_KEY
from tests.harness.pulumi_program import run_program

BOUNDARY = Account("123456789012").boundary_arn
WITH_BOUNDARY = {"fsdp-eks:cluster": {"rolePermissionsBoundary": BOUNDARY}}
SCOPE = IamScope("p5-16", BOUNDARY)
# The role pulumi-eks's cluster registers for its service role, which the mocks cannot show (a remote component's
# children): pulumi/pulumi-eks nodejs/eks/servicerole.ts, `new aws.iam.Role(`${name}-role`, {description,
# assumeRolePolicy, tags: args.tags})`, the cluster's tags unset by this program.
PULUMI_EKS_SERVICE_ROLE = {
    "description": "Allows EKS to manage clusters on your behalf.",
    "assumeRolePolicy": json.dumps({"Version": "2012-10-17", "Statement": []}),
    "tags": None,
}


def test_a_role_gets_the_path_tag_and_boundary_and_keeps_its_properties() -> None:
    props = scoped_props(ROLE, {**PULUMI_EKS_SERVICE_ROLE, "tags": {"team": "ml"}}, SCOPE)
    assert props == {
        **PULUMI_EKS_SERVICE_ROLE,
        "path": IAM_PATH,
        "tags": {"team": "ml", STACK_TAG_KEY: "p5-16"},
        "permissionsBoundary": BOUNDARY,
    }


def test_pulumi_eks_service_role_without_tags_gets_them() -> None:
    props = scoped_props(ROLE, PULUMI_EKS_SERVICE_ROLE, SCOPE)
    assert props is not None and props["tags"] == {STACK_TAG_KEY: "p5-16"} and props["path"] == IAM_PATH


def test_a_customer_managed_policy_gets_the_path_and_tag_but_no_boundary() -> None:
    props = scoped_props(POLICY, {"policy": "{}", "path": "/elsewhere/"}, SCOPE)
    assert props == {"policy": "{}", "path": IAM_PATH, "tags": {STACK_TAG_KEY: "p5-16"}}


def test_the_stacks_tag_value_wins_over_a_resources_own() -> None:
    props = scoped_props(ROLE, {"tags": {STACK_TAG_KEY: "another-stack"}}, SCOPE)
    assert props is not None and props["tags"] == {STACK_TAG_KEY: "p5-16"}


def test_tags_that_are_not_a_known_mapping_are_refused() -> None:
    with pytest.raises(ValueError, match=STACK_TAG_KEY):
        scoped_props(POLICY, {"tags": "computed later"}, SCOPE)


def test_without_a_boundary_roles_still_get_the_path_and_tag() -> None:
    props = scoped_props(ROLE, {"assumeRolePolicy": "{}"}, IamScope("dev"))
    assert props == {"assumeRolePolicy": "{}", "path": IAM_PATH, "tags": {STACK_TAG_KEY: "dev"}}


def test_other_resources_are_left_as_they_are() -> None:
    for type_token in ("aws:iam/rolePolicyAttachment:RolePolicyAttachment", "eks:index:Cluster", "aws:kms/key:Key"):
        args = pulumi.ResourceTransformArgs(True, type_token, "x", {"role": "r"}, pulumi.ResourceOptions())
        assert scoped_iam(args, SCOPE) is None


@pytest.mark.program
@pytest.mark.parametrize("preview", ["first", "update"])
def test_every_role_and_policy_of_the_program_is_scoped_with_the_boundary(preview: str) -> None:
    run = run_program("p5-16", WITH_BOUNDARY, preview=preview)
    assert run.error is None, run.error
    roles, policies = run.of_type(ROLE), run.of_type(POLICY)
    assert roles and all(r.inputs.get("permissionsBoundary") == BOUNDARY for r in roles)
    for resource in roles + policies:
        assert resource.inputs["path"] == IAM_PATH, resource.name
        assert resource.inputs["tags"][STACK_TAG_KEY] == "p5-16", resource.name


@pytest.mark.program
def test_without_the_setting_no_role_gets_a_boundary() -> None:
    run = run_program("p5-16", preview="first")
    assert run.error is None, run.error
    assert all("permissionsBoundary" not in r.inputs for r in run.of_type(ROLE))


@pytest.mark.program
def test_a_boundary_that_is_not_a_policy_arn_is_refused() -> None:
    run = run_program("p5-2", {"fsdp-eks:cluster": {"rolePermissionsBoundary": "fsdp-eks-role-boundary"}})
    assert run.error is not None and run.error["kind"] == "ConfigError"
    assert "cluster.rolePermissionsBoundary" in run.error["message"]
