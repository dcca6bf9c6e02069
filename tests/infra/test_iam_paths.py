"""What the program registers in IAM and KMS, for every shipped stack, against what the CI deploy role may do
(ci/deploy_policy.py): every role and customer managed policy under IAM_PATH with the stack's tag, no inline
policies, only attachable policies attached, every action a stack policy grants inside the permissions boundary, and
the cluster's key tagged."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ci.deploy_policy import Account, deploy_policy
from ci.role_boundary import ATTACHABLE_MANAGED_POLICIES, role_boundary
from stack.names import IAM_PATH, STACK_TAG_KEY
from tests.ci.iam_eval import allowed
from tests.harness.pulumi_program import ProgramRun, run_program

ROLE = "aws:iam/role:Role"
POLICY = "aws:iam/policy:Policy"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
ACCOUNT = Account("123456789012")  # the fake cloud's account (tests/harness/fake_eks.py ACCOUNT)
BOUNDARY = role_boundary(ACCOUNT.account_id, ACCOUNT.partition)
# Attached inside pulumi-eks's cluster component, whose children the mocks do not show (nodejs/eks/cluster/cluster.ts:
# the cluster service role with AmazonEKSClusterPolicy).
PULUMI_EKS_ATTACHES = ("AmazonEKSClusterPolicy",)


@pytest.fixture(scope="module")
def with_cloudwatch() -> ProgramRun:
    run = run_program("p5-2", {"fsdp-eks:monitoring": {"cloudwatchObservability": True}})
    assert run.error is None, run.error
    return run


@pytest.mark.program
def test_every_role_and_policy_lives_under_the_path_with_the_stacks_tag(stack_run: ProgramRun) -> None:
    scoped = stack_run.of_type(ROLE) + stack_run.of_type(POLICY)
    assert scoped
    for resource in scoped:
        assert resource.inputs["path"] == IAM_PATH, resource.name
        assert resource.inputs["tags"][STACK_TAG_KEY] == stack_run.stack, resource.name


@pytest.mark.program
def test_the_program_writes_no_inline_policy(stack_run: ProgramRun) -> None:
    assert stack_run.of_type("aws:iam/rolePolicy:RolePolicy") == []
    assert all(not r.inputs.get("inlinePolicies") for r in stack_run.of_type(ROLE))


@pytest.mark.program
def test_the_clusters_key_carries_the_stacks_tag(stack_run: ProgramRun) -> None:
    (key,) = stack_run.of_type("aws:kms/key:Key")
    assert key.inputs["tags"] == {STACK_TAG_KEY: stack_run.stack}


def _managed(run: ProgramRun) -> set[str]:
    prefix = ACCOUNT.managed_policy_arn("")
    return {
        a.inputs["policyArn"].removeprefix(prefix)
        for a in run.of_type(ATTACHMENT)
        if a.inputs["policyArn"].startswith(prefix)
    }


@pytest.mark.program
def test_the_attachable_managed_policies_are_exactly_those_the_program_attaches(with_cloudwatch: ProgramRun) -> None:
    stacks = [run_program(stack) for stack in ("p5-16", "p5-2")]
    attached = set().union(*(_managed(run) for run in [*stacks, with_cloudwatch])) | set(PULUMI_EKS_ATTACHES)
    assert attached == set(ATTACHABLE_MANAGED_POLICIES)


@pytest.mark.program
def test_every_attachment_is_one_the_deploy_role_may_make(stack_run: ProgramRun) -> None:
    deploy = deploy_policy(ACCOUNT)
    # A role's ARN holds its path (IAM User Guide, "IAM identifiers"); the fake cloud's ARNs leave the path out.
    roles = {
        r.id: ACCOUNT.arn("role", f"{r.inputs['path'].strip('/')}/{r.outputs['name']}") for r in stack_run.of_type(ROLE)
    }
    for attachment in stack_run.of_type(ATTACHMENT):
        context = {"iam:PolicyARN": attachment.inputs["policyArn"], "iam:PermissionsBoundary": ACCOUNT.boundary_arn}
        assert allowed(deploy, "iam:AttachRolePolicy", roles[attachment.inputs["role"]], context), attachment.name


def _statement_context(statement: dict[str, Any]) -> dict[str, Any]:
    """The request a statement's own positive conditions describe (a pattern's `*` read as any value)."""
    return {
        key: value.replace("*", "x") if isinstance(value, str) else value
        for operator, keys in statement.get("Condition", {}).items()
        if operator in ("StringEquals", "StringLike", "ArnEquals", "ArnLike", "Bool")
        for key, value in keys.items()
    }


def _customer_policies(run: ProgramRun) -> list[dict[str, Any]]:
    return [json.loads(p.inputs["policy"]) for p in run.of_type(POLICY)]


@pytest.mark.program
def test_every_action_a_stack_policy_grants_is_inside_the_boundary(stack_run: ProgramRun) -> None:
    for policy in _customer_policies(stack_run):
        for statement in (s for s in policy["Statement"] if s["Effect"] == "Allow"):
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            for action in actions:
                for resource in resources:  # the boundary scopes some reads by resource (secrets under a prefix)
                    # S3 sets s3:ResourceAccount to the bucket owner's account on every request; the stack's
                    # bucket is its own.
                    context = {**_statement_context(statement), "s3:ResourceAccount": ACCOUNT.account_id}
                    assert allowed(BOUNDARY, action, resource, context), (stack_run.stack, action, resource)


@pytest.mark.program
def test_a_gated_model_stack_has_a_customer_policy_to_check() -> None:
    """The test above is not vacuous: a stack whose model is gated registers the job's token policy."""
    gated = [run_program(stack) for stack in ("p5-16", "p5-2")]
    assert any(_customer_policies(run) for run in gated)


def test_the_boundary_check_refuses_a_policy_beyond_it() -> None:
    wider = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}
    assert not allowed(BOUNDARY, wider["Action"], "*", _statement_context(wider))
    decrypt_anywhere = {"Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*"}
    assert not allowed(BOUNDARY, "kms:Decrypt", "*", _statement_context(decrypt_anywhere))
