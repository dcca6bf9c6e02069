"""The `pulumi-up` environment's protection rules, as GitHub's REST API takes them.

PUT /repos/{owner}/{repo}/environments/pulumi-up (GitHub REST API, "Create or update an environment": wait_timer,
prevent_self_review, reviewers, deployment_branch_policy, can_admins_bypass) and one deployment branch policy
(POST .../environments/pulumi-up/deployment-branch-policies, name and type). With custom_branch_policies the
environment admits only jobs whose GITHUB_REF matches a listed branch, so a pull request's branch (or any other)
cannot run a job in it, and its secrets (the deploy token) never reach such a job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ci.github_oidc import DEPLOY_BRANCH, DEPLOY_ENVIRONMENT

REVIEWER_TYPES = ("User", "Team")
MAX_REVIEWERS = 6  # GitHub: "You can list up to six users or teams as reviewers"


@dataclass(frozen=True)
class Reviewer:
    type: str
    id: int

    @classmethod
    def parse(cls, text: str) -> Reviewer:
        """`Team:1234` or `User:42` (numeric ids: `gh api orgs/ORG/teams/SLUG --jq .id`, `gh api users/LOGIN
        --jq .id`)."""
        kind, _, number = text.partition(":")
        if kind not in REVIEWER_TYPES or not number.isdigit():
            raise ValueError(f"expected Team:<id> or User:<id>, got {text!r}")
        return cls(kind, int(number))


def environment_settings(reviewers: list[Reviewer]) -> dict[str, Any]:
    if not 1 <= len(reviewers) <= MAX_REVIEWERS:
        raise ValueError(f"the environment needs 1 to {MAX_REVIEWERS} required reviewers, got {len(reviewers)}")
    return {
        "wait_timer": 0,
        # Whoever pushed the commit (and so started the run) cannot approve its deploy.
        "prevent_self_review": True,
        "reviewers": [{"type": r.type, "id": r.id} for r in reviewers],
        "deployment_branch_policy": {"protected_branches": False, "custom_branch_policies": True},
        # "Allow administrators to bypass configured protection rules" is on unless the request turns it off: the
        # API's default is true (google/go-github github/repos_environments.go, CreateUpdateEnvironment, which sends
        # true when unset for that reason). Off, a repository admin cannot start `up` without a reviewer either.
        "can_admins_bypass": False,
    }


def branch_policy() -> dict[str, str]:
    return {"name": DEPLOY_BRANCH, "type": "branch"}


def api_paths(repository: str) -> tuple[str, str]:
    base = f"repos/{repository}/environments/{DEPLOY_ENVIRONMENT}"
    return base, f"{base}/deployment-branch-policies"
