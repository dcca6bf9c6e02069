"""job.hfTokenSecret takes a Secrets Manager secret's name or complete ARN in the stack's region, and a stack that still
sets a former secret key (fsdp-eks:hfToken, fsdp-eks:kubeconfig) is refused with where it moved
(stack/hub_token_secret.py)."""

from __future__ import annotations

from typing import Any

import pytest

from stack.fields import ConfigError
from stack.files import raw_stack_config
from stack.hub_token_secret import secret_reference_problem, secret_resource
from stack.parse import parse_stack_config
from tests.harness.pulumi_program import run_program

STACK = "p5-1"
ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:fsdp-eks/hf-token-AbC123"


def with_secret(secret: Any) -> dict[str, Any]:
    raw = raw_stack_config(STACK)
    raw["fsdp-eks:job"] = {**raw["fsdp-eks:job"], "hfTokenSecret": secret}
    return raw


def problems(raw: dict[str, Any]) -> list[str]:
    """The problems of `raw` read without the engine: every check but the gated model's (whose secret a refused
    value leaves unset) runs there too."""
    with pytest.raises(ConfigError) as raised:
        parse_stack_config(raw, STACK)
    return raised.value.problems


@pytest.mark.parametrize(
    "reference", ["fsdp-eks/hf-token", "a", "x" * 512, "team_a+b=c.d@e-f/token", ARN, ARN.replace(":aws:", ":aws-cn:")]
)
def test_a_name_or_a_complete_arn_is_a_secret_reference(reference: str) -> None:
    assert secret_reference_problem(reference) is None


@pytest.mark.parametrize(
    "reference",
    [
        "",  # a name is 1 to 512 characters
        "x" * 513,
        "hf token",  # a space is none of /_+=.@-
        "token#1",
        "arn:aws:secretsmanager:us-east-1:123456789012:secret:fsdp-eks/hf-token",  # partial: no six characters
        "arn:aws:ssm:us-east-1:123456789012:parameter/hf-token",  # not a Secrets Manager secret
        "arn:aws:secretsmanager:us-east-1:12345:secret:token-AbC123",  # not a 12-digit account
    ],
)
def test_anything_else_is_refused_naming_what_is_allowed(reference: str) -> None:
    (problem,) = problems(with_secret(reference))
    assert problem.startswith(f"fsdp-eks:job.hfTokenSecret: {reference!r} is not allowed; expected the name of a")
    assert "complete ARN" in problem


def test_an_arn_in_another_region_than_the_stacks_is_refused() -> None:
    other = ARN.replace("us-east-1", "eu-west-1")
    (problem,) = problems(with_secret(other))
    assert "expected a secret in the stack's region us-east-1" in problem and "not in eu-west-1" in problem


def test_a_name_grants_on_the_secrets_arn_with_its_six_random_characters_as_wildcards() -> None:
    resource = secret_resource("fsdp-eks/hf-token", "aws", "us-east-1", "123456789012")
    assert resource == "arn:aws:secretsmanager:us-east-1:123456789012:secret:fsdp-eks/hf-token-??????"


def test_an_arn_grants_on_itself() -> None:
    assert secret_resource(ARN, "aws", "us-east-1", "999999999999") == ARN


def test_a_stack_that_still_sets_the_token_is_told_the_commands_that_move_it() -> None:
    (problem,) = problems(raw_stack_config(STACK) | {"fsdp-eks:hfToken": "hf_x"})
    assert problem.startswith("fsdp-eks:hfToken: no longer read")
    assert "`aws secretsmanager create-secret --name fsdp-eks/hf-token --secret-string hf_...`" in problem
    assert "`pulumi config set --path fsdp-eks:job.hfTokenSecret fsdp-eks/hf-token`" in problem
    assert "`pulumi config rm fsdp-eks:hfToken`" in problem
    assert "hf_x" not in problem


def test_a_stack_that_still_sets_a_kubeconfig_is_told_the_cluster_is_reached_by_name() -> None:
    (problem,) = problems(raw_stack_config(STACK) | {"fsdp-eks:kubeconfig": '{"kind": "Config"}'})
    assert problem.startswith("fsdp-eks:kubeconfig: no longer read")
    assert "aws eks get-token" in problem and "`pulumi config rm fsdp-eks:kubeconfig`" in problem


@pytest.mark.program
def test_the_program_refuses_a_lingering_secret_key_before_any_resource() -> None:
    run = run_program(STACK, secrets={"fsdp-eks:hfToken": "hf_" + "x" * 34})
    assert run.error is not None and "fsdp-eks:hfToken: no longer read" in run.error["message"]
    assert "hf_" + "x" * 34 not in run.error["message"]
    assert [r for r in run.resources if not r.type.startswith("pulumi:")] == []


BOUNDARY = "arn:aws:iam::123456789012:policy/fsdp-eks-role-boundary"


def ci_deployed(raw: dict[str, Any]) -> dict[str, Any]:
    """The stack as CI deploys it: its roles carry the permissions boundary (docs/ci.md)."""
    return raw | {"fsdp-eks:cluster": {**(raw.get("fsdp-eks:cluster") or {}), "rolePermissionsBoundary": BOUNDARY}}


@pytest.mark.parametrize(
    "reference",
    [
        "prod/hf-token",
        "fsdp-eks-hf-token",  # the prefix is the folder fsdp-eks/, not the letters
        "team/fsdp-eks/hf-token",
        ARN.replace("fsdp-eks/hf-token", "prod/hf-token"),  # an ARN's name part counts
    ],
)
def test_a_ci_deployed_stack_refuses_a_token_secret_its_roles_may_not_read(reference: str) -> None:
    """The boundary lets a stack's roles read only secrets named fsdp-eks/* (ci/role_boundary.py): the job would be
    denied its token at start, so preview says it first."""
    (problem,) = problems(ci_deployed(with_secret(reference)))
    assert problem.startswith(f"fsdp-eks:job.hfTokenSecret: {reference!r} is not allowed with ")
    assert "cluster.rolePermissionsBoundary" in problem and "starts 'fsdp-eks/'" in problem
    parse_stack_config(with_secret(reference), STACK)  # a stack deployed without the boundary may name any secret


@pytest.mark.parametrize("reference", ["fsdp-eks/hf-token", "fsdp-eks/team-a/token", ARN])
def test_a_ci_deployed_stack_reads_its_token_under_the_prefix(reference: str) -> None:
    assert parse_stack_config(ci_deployed(with_secret(reference)), STACK).job.hf_token_secret == reference


@pytest.mark.program
def test_the_program_refuses_a_ci_deployed_stacks_token_outside_the_prefix_before_any_resource() -> None:
    run = run_program(STACK, ci_deployed(with_secret("prod/hf-token")))
    assert run.error is not None and run.error["kind"] == "ConfigError"
    assert any("job.hfTokenSecret: 'prod/hf-token'" in p for p in run.error["problems"])
    assert [r for r in run.resources if not r.type.startswith("pulumi:")] == []
