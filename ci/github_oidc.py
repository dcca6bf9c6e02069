"""GitHub Actions as an OIDC identity provider to AWS and Pulumi Cloud: the subject claims a job presents under this
repository's subject template, and the trust policies that pin a role to this repository and to one event, branch or
environment.

The repository's template (`subject_customization()`, applied once with GitHub's REST API "Set the customization
template for an OIDC subject claim for a repository", PUT /repos/{owner}/{repo}/actions/oidc/customization/sub)
includes the claims `repo`, `context`, `ref` and `event_name`. GitHub then writes each claim as `key:value` in the
template's order, except `repo`, which keeps the default's `repo:OWNER/REPO`, and `context`, which is the default
subject's tail after the repository (`environment:NAME`, `ref:refs/heads/BRANCH` or `pull_request`) (GitHub docs,
"OpenID Connect reference", Customizing the subject claims: the example template `repo`, `context`,
`job_workflow_ref` gives `repo:octo-org/octo-repo:environment:prod:job_workflow_ref:...`). So:

    an approved deploy job   repo:O/R:environment:pulumi-up:ref:refs/heads/main:event_name:push
    the deploy's preview     repo:O/R:ref:refs/heads/main:ref:refs/heads/main:event_name:workflow_dispatch
    a pull request           repo:O/R:pull_request:ref:refs/pull/42/merge:event_name:pull_request

With the default template an environment's subject named no branch: a job of any branch the environment admitted
could assume the deploy role. Now the branch and the event are in the token itself, whatever the environment's own
rules say. Repositories created after July 15, 2026 (or opted in) use immutable subjects, `repo:OWNER@OWNER_ID/
REPO@REPO_ID:...` (same page, Immutable subject claims); `gh api repos/OWNER/REPO/actions/oidc/customization/sub
--jq .sub_claim_prefix` shows which one a repository presents.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ISSUER_HOST = "token.actions.githubusercontent.com"
ISSUER_URL = f"https://{ISSUER_HOST}"
# The audience configure-aws-credentials requests by default (its `audience` input).
AUDIENCE = "sts.amazonaws.com"
DEPLOY_ENVIRONMENT = "pulumi-up"
DEPLOY_BRANCH = "main"
# The claims of every token's subject, in order. Each key may hold only letters, digits and underscores (GitHub REST
# API, the request body's include_claim_keys).
SUBJECT_CLAIM_KEYS = ("repo", "context", "ref", "event_name")
# The events that start .github/workflows/deploy.yml (its `on:`; a test keeps the two equal).
DEPLOY_EVENTS = ("push", "workflow_dispatch")
PULL_REQUEST_EVENT = "pull_request"
# A pull_request run's GITHUB_REF, and so its token's `ref`, is the PR's merge ref refs/pull/<number>/merge (GitHub
# docs, "Events that trigger workflows", pull_request). The number is the one part of a subject a trust policy must
# match with a wildcard; git refuses `:` in a ref name (git-check-ref-format, rule 4), so `*` cannot reach into the
# next claim.
PULL_REQUEST_REF = "refs/pull/*/merge"
WILDCARDS = ("*", "?")


def subject_customization() -> dict[str, Any]:
    """The body of PUT /repos/{owner}/{repo}/actions/oidc/customization/sub (`use_default: false` makes the
    repository use these keys rather than GitHub's or the organization's template)."""
    return {"use_default": False, "include_claim_keys": list(SUBJECT_CLAIM_KEYS)}


def branch_ref(branch: str) -> str:
    return f"refs/heads/{branch}"


@dataclass(frozen=True)
class Repository:
    """owner/name, and the numeric ids when the repository uses immutable subject claims."""

    owner: str
    name: str
    owner_id: int | None = None
    repository_id: int | None = None

    @classmethod
    def parse(cls, full_name: str, owner_id: int | None = None, repository_id: int | None = None) -> Repository:
        owner, _, name = full_name.partition("/")
        if not owner or not name or "/" in name:
            raise ValueError(f"expected OWNER/REPO, got {full_name!r}")
        if (owner_id is None) != (repository_id is None):
            raise ValueError("immutable subject claims need both the owner id and the repository id")
        return cls(owner, name, owner_id, repository_id)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def subject_prefix(self) -> str:
        if self.owner_id is None:
            return f"repo:{self.owner}/{self.name}"
        return f"repo:{self.owner}@{self.owner_id}/{self.name}@{self.repository_id}"

    def subject(self, context: str, ref: str, event_name: str) -> str:
        """The subject under SUBJECT_CLAIM_KEYS: repo, context, ref, event_name."""
        return f"{self.subject_prefix}:{context}:ref:{ref}:event_name:{event_name}"

    def pull_request(self) -> str:
        """Any pull request of this repository (the PR number is a wildcard)."""
        return self.subject(PULL_REQUEST_EVENT, PULL_REQUEST_REF, PULL_REQUEST_EVENT)

    def branch(self, event_name: str, branch: str = DEPLOY_BRANCH) -> str:
        """A job of a branch run that references no environment."""
        return self.subject(f"ref:{branch_ref(branch)}", branch_ref(branch), event_name)

    def environment(self, event_name: str, environment: str = DEPLOY_ENVIRONMENT, branch: str = DEPLOY_BRANCH) -> str:
        """A job of `environment`, run for `branch` by `event_name`."""
        return self.subject(f"environment:{environment}", branch_ref(branch), event_name)


def provider_arn(account_id: str, partition: str = "aws") -> str:
    return f"arn:{partition}:iam::{account_id}:oidc-provider/{ISSUER_HOST}"


def has_wildcard(subject: str) -> bool:
    return any(w in subject for w in WILDCARDS)


def trust_policy(account_id: str, subjects: list[str], partition: str = "aws") -> dict[str, Any]:
    """A role's trust policy: GitHub's OIDC tokens for our audience and these subjects. Exact subjects are matched
    with StringEquals; a list with a pattern (the pull requests') with StringLike, where a subject without `*` or `?`
    still matches only itself (neither can appear in a repository or ref name)."""
    audience = {f"{ISSUER_HOST}:aud": AUDIENCE}
    subject = {f"{ISSUER_HOST}:sub": sorted(subjects)}
    if any(has_wildcard(s) for s in subjects):
        condition = {"StringEquals": audience, "StringLike": subject}
    else:
        condition = {"StringEquals": audience | subject}
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "GitHubActionsOfThisRepository",
                "Effect": "Allow",
                "Principal": {"Federated": provider_arn(account_id, partition)},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": condition,
            }
        ],
    }


def preview_subjects(repository: Repository) -> list[str]:
    """Pull requests of this repository, and the deploy workflow's jobs on main that reference no environment (the
    stack check and the preview an approval follows)."""
    return [repository.pull_request(), *(repository.branch(event) for event in DEPLOY_EVENTS)]


def deploy_subjects(repository: Repository) -> list[str]:
    """Only jobs of the approved `pulumi-up` environment, on main, started by the deploy workflow's events."""
    return [repository.environment(event) for event in DEPLOY_EVENTS]
