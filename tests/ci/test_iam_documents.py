"""The CI roles' IAM documents, parsed and asked concrete questions (tests/ci/iam_eval.py): who may assume each role,
and what a preview may read (the deploy role and the boundary: test_deploy_policy.py)."""

from __future__ import annotations

import pytest

from ci.deploy_policy import Account
from ci.github_oidc import ISSUER_HOST, Repository, deploy_subjects, preview_subjects, trust_policy
from ci.preview_policy import INVOKE_ACTIONS, preview_actions, preview_policy
from tests.ci.iam_eval import allowed
from tests.harness.pulumi_program import ProgramRun, run_program

ACCOUNT = Account("123456789012")
REPO = Repository.parse("acme/fsdp-eks")
PREVIEW = preview_policy()


def _assume(policy: dict, subject: str, audience: str = "sts.amazonaws.com") -> bool:
    (statement,) = policy["Statement"]
    context = {f"{ISSUER_HOST}:sub": subject, f"{ISSUER_HOST}:aud": audience}
    return statement["Principal"]["Federated"].endswith(ISSUER_HOST) and allowed(
        {"Statement": [{k: v for k, v in statement.items() if k != "Principal"} | {"Resource": "*"}]},
        "sts:AssumeRoleWithWebIdentity",
        "*",
        context,
    )


# --- trust ----------------------------------------------------------------------------------------------------


def test_the_preview_role_trusts_this_repositorys_pull_requests_and_main_only() -> None:
    trust = trust_policy(ACCOUNT.account_id, preview_subjects(REPO))
    assert _assume(trust, "repo:acme/fsdp-eks:pull_request")
    assert _assume(trust, "repo:acme/fsdp-eks:ref:refs/heads/main")
    for other in (
        "repo:acme/fsdp-eks:ref:refs/heads/feature",
        "repo:evil/fsdp-eks:pull_request",
        "repo:acme/fsdp-eks:environment:pulumi-up",
        "repo:acme/fsdp-eks-fork:pull_request",
    ):
        assert not _assume(trust, other), other
    assert not _assume(trust, "repo:acme/fsdp-eks:pull_request", audience="https://github.com/acme")


def test_the_deploy_role_trusts_only_the_pulumi_up_environment() -> None:
    trust = trust_policy(ACCOUNT.account_id, deploy_subjects(REPO))
    assert _assume(trust, "repo:acme/fsdp-eks:environment:pulumi-up")
    for other in (
        "repo:acme/fsdp-eks:ref:refs/heads/main",
        "repo:acme/fsdp-eks:pull_request",
        "repo:acme/fsdp-eks:environment:staging",
    ):
        assert not _assume(trust, other), other


def test_trust_conditions_are_exact_subjects_without_wildcards() -> None:
    for subjects in (preview_subjects(REPO), deploy_subjects(REPO)):
        (statement,) = trust_policy(ACCOUNT.account_id, subjects)["Statement"]
        assert set(statement["Condition"]) == {"StringEquals"}
        assert not any("*" in s for s in statement["Condition"]["StringEquals"][f"{ISSUER_HOST}:sub"])


def test_immutable_subject_claims_carry_the_owner_and_repository_ids() -> None:
    repo = Repository.parse("acme/fsdp-eks", owner_id=123456, repository_id=456789)
    assert repo.environment() == "repo:acme@123456/fsdp-eks@456789:environment:pulumi-up"
    with pytest.raises(ValueError):
        Repository.parse("acme/fsdp-eks", owner_id=1)


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
        ("eks:DescribeCluster", "*"),
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


def test_every_data_source_a_preview_calls_is_allowed_to_the_preview_role(preview_runs: list[ProgramRun]) -> None:
    called = {token for run in preview_runs for token in run.invokes}
    assert called and called <= set(INVOKE_ACTIONS), called - set(INVOKE_ACTIONS)
    for token in called:
        assert all(allowed(PREVIEW, action) for action in INVOKE_ACTIONS[token]), token
