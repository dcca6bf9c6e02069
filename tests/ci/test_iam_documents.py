"""The preview role's policy asked concrete questions (tests/ci/iam_eval.py): what a preview may read. Who may assume
the CI roles: test_github_oidc.py; the deploy role and the boundary: test_deploy_policy.py."""

from __future__ import annotations

import pytest

from ci.deploy_policy import Account, deploy_policy
from ci.preview_policy import INVOKE_ACTIONS, preview_actions, preview_policy
from tests.ci.iam_eval import allowed
from tests.harness.pulumi_program import ProgramRun, run_program

PREVIEW = preview_policy()


# --- preview --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "action,resource",
    [
        ("s3:GetObject", "arn:aws:s3:::state-bucket/key"),
        ("ssm:GetParameter", "*"),
        ("ssm:GetParametersByPath", "*"),
        ("logs:GetLogEvents", "*"),
        ("logs:FilterLogEvents", "*"),
        ("secretsmanager:GetSecretValue", "*"),
        ("kms:Decrypt", "*"),
        ("ec2:DescribeInstances", "*"),
        ("iam:GetRole", "*"),
    ],
)
def test_the_preview_role_reads_no_data_a_pull_request_could_print(action: str, resource: str) -> None:
    assert not allowed(PREVIEW, action, resource)


def test_the_preview_role_only_reads() -> None:
    assert preview_actions() and all(a.split(":")[1].startswith(("Describe", "Get", "List")) for a in preview_actions())
    assert not any("*" in a for a in preview_actions())


@pytest.fixture(scope="module", params=["first", "update"])
def preview_runs(request: pytest.FixtureRequest) -> list[ProgramRun]:
    """A stack that builds everything, and the option that adds a data source, as that kind of preview runs them."""
    runs = [run_program("p5-16", preview=request.param)]
    runs.append(run_program("p5-2", {"fsdp-eks:monitoring": {"cloudwatchObservability": True}}, preview=request.param))
    assert all(r.error is None for r in runs), [r.error for r in runs]
    return runs


@pytest.mark.program
def test_every_data_source_a_preview_calls_is_allowed_to_the_preview_role(preview_runs: list[ProgramRun]) -> None:
    called = {token for run in preview_runs for token in run.invokes}
    assert called and called <= set(INVOKE_ACTIONS), called - set(INVOKE_ACTIONS)
    for token in called:
        assert all(allowed(PREVIEW, action) for action in INVOKE_ACTIONS[token]), token


@pytest.mark.program
def test_every_data_source_a_preview_calls_is_allowed_to_the_deploy_role_too(preview_runs: list[ProgramRun]) -> None:
    """`pulumi up` runs the program again as the deploy role: a data source it may not call would change what the
    update registers from what the approved preview showed (the GPU nodes' price above all, infra/prices.py)."""
    deploy = deploy_policy(Account("123456789012"))
    for token in {token for run in preview_runs for token in run.invokes}:
        assert all(allowed(deploy, action) for action in INVOKE_ACTIONS[token]), token
