"""Who may assume the CI roles and get Pulumi team tokens, under the repository's OIDC subject template (repo,
context, ref, event_name): the deploy credentials only for the approved environment's jobs on main started by the
deploy workflow's events; the preview credentials for pull requests and main's unapproved jobs."""

from __future__ import annotations

import fnmatch

import pytest

from ci.github_oidc import (
    ISSUER_HOST,
    SUBJECT_CLAIM_KEYS,
    Repository,
    deploy_subjects,
    preview_subjects,
    subject_customization,
    trust_policy,
)
from ci.pulumi_oidc import DEPLOY_TEAM, PREVIEW_TEAM, oidc_policies
from tests.ci.iam_eval import allowed

ACCOUNT_ID = "123456789012"
REPO = Repository.parse("acme/fsdp-eks")
PREFIX = "repo:acme/fsdp-eks"
DEPLOY_PUSH = f"{PREFIX}:environment:pulumi-up:ref:refs/heads/main:event_name:push"
DEPLOY_DISPATCH = f"{PREFIX}:environment:pulumi-up:ref:refs/heads/main:event_name:workflow_dispatch"
PULL_REQUEST = f"{PREFIX}:pull_request:ref:refs/pull/42/merge:event_name:pull_request"
MAIN_PUSH = f"{PREFIX}:ref:refs/heads/main:ref:refs/heads/main:event_name:push"
# Subjects a hostile branch, another event or another repository can present.
FOREIGN = [
    f"{PREFIX}:environment:pulumi-up:ref:refs/heads/feature:event_name:push",  # an environment that admitted a branch
    f"{PREFIX}:environment:pulumi-up:ref:refs/heads/main:event_name:schedule",
    f"{PREFIX}:environment:pulumi-up:ref:refs/heads/main:event_name:pull_request_target",
    f"{PREFIX}:environment:pulumi-up:ref:refs/pull/42/merge:event_name:pull_request",
    f"{PREFIX}:environment:staging:ref:refs/heads/main:event_name:push",
    f"{PREFIX}:ref:refs/heads/feature:ref:refs/heads/feature:event_name:push",
    f"{PREFIX}:pull_request:ref:refs/pull/42/merge:event_name:pull_request_target",
    f"{PREFIX}-fork:environment:pulumi-up:ref:refs/heads/main:event_name:push",
    "repo:evil/fsdp-eks:pull_request:ref:refs/pull/42/merge:event_name:pull_request",
    f"{PREFIX}:environment:pulumi-up",  # the default template's subject: refused once the template applies
    f"{PREFIX}:pull_request",
]


def _assume(trust: dict, subject: str, audience: str = "sts.amazonaws.com") -> bool:
    (statement,) = trust["Statement"]
    context = {f"{ISSUER_HOST}:sub": subject, f"{ISSUER_HOST}:aud": audience}
    return statement["Principal"]["Federated"].endswith(ISSUER_HOST) and allowed(
        {"Statement": [{k: v for k, v in statement.items() if k != "Principal"} | {"Resource": "*"}]},
        "sts:AssumeRoleWithWebIdentity",
        "*",
        context,
    )


def test_the_subject_template_includes_the_ref_and_the_event() -> None:
    assert subject_customization() == {
        "use_default": False,
        "include_claim_keys": ["repo", "context", "ref", "event_name"],
    }
    assert list(SUBJECT_CLAIM_KEYS) == subject_customization()["include_claim_keys"]


def test_subjects_are_written_as_github_writes_a_customized_subject() -> None:
    # GitHub docs' example: include_claim_keys repo, context, job_workflow_ref ->
    # repo:octo-org/octo-repo:environment:prod:job_workflow_ref:<path>. `repo` and `context` keep the default's form,
    # every other key is written key:value.
    assert REPO.environment("push") == DEPLOY_PUSH
    assert REPO.branch("push") == MAIN_PUSH
    assert fnmatch.fnmatchcase(PULL_REQUEST, REPO.pull_request())


def test_immutable_subject_claims_carry_the_owner_and_repository_ids() -> None:
    repo = Repository.parse("acme/fsdp-eks", owner_id=123456, repository_id=456789)
    assert repo.environment("push").startswith("repo:acme@123456/fsdp-eks@456789:environment:pulumi-up:")
    with pytest.raises(ValueError):
        Repository.parse("acme/fsdp-eks", owner_id=1)


def test_the_deploy_role_trusts_only_the_environment_on_main_for_the_deploy_events() -> None:
    trust = trust_policy(ACCOUNT_ID, deploy_subjects(REPO))
    assert _assume(trust, DEPLOY_PUSH) and _assume(trust, DEPLOY_DISPATCH)
    for subject in [*FOREIGN, PULL_REQUEST, MAIN_PUSH]:
        assert not _assume(trust, subject), subject
    assert not _assume(trust, DEPLOY_PUSH, audience="https://github.com/acme")


def test_the_deploy_roles_trust_has_no_wildcard() -> None:
    (statement,) = trust_policy(ACCOUNT_ID, deploy_subjects(REPO))["Statement"]
    assert set(statement["Condition"]) == {"StringEquals"}


def test_the_preview_role_trusts_pull_requests_and_mains_unapproved_jobs() -> None:
    trust = trust_policy(ACCOUNT_ID, preview_subjects(REPO))
    assert _assume(trust, PULL_REQUEST) and _assume(trust, MAIN_PUSH)
    for subject in FOREIGN:
        assert not _assume(trust, subject), subject


def test_the_pull_request_wildcard_stays_within_the_pr_number() -> None:
    (statement,) = trust_policy(ACCOUNT_ID, preview_subjects(REPO))["Statement"]
    patterns = statement["Condition"]["StringLike"][f"{ISSUER_HOST}:sub"]
    assert [p for p in patterns if "*" in p or "?" in p] == [REPO.pull_request()]
    assert REPO.pull_request().count("*") == 1 and ":ref:refs/pull/*/merge:" in REPO.pull_request()


def test_pulumi_issues_the_deploy_team_only_to_the_deploy_subjects() -> None:
    policies = oidc_policies(REPO, "acme")
    by_team = {
        team: {p["rules"]["sub"] for p in policies if p["teamName"] == team} for team in (PREVIEW_TEAM, DEPLOY_TEAM)
    }
    assert by_team[DEPLOY_TEAM] == {DEPLOY_PUSH, DEPLOY_DISPATCH}
    assert by_team[PREVIEW_TEAM] == set(preview_subjects(REPO))
    assert all(p["decision"] == "allow" and p["tokenType"] == "team" for p in policies)
    assert {p["rules"]["aud"] for p in policies} == {"urn:pulumi:org:acme"}
