"""GitHub Actions as an OIDC identity provider to AWS: the subject claims a job presents and the trust policies that
pin a role to this repository and to one event, branch or environment.

Subject formats (GitHub docs, "OpenID Connect reference", Example subject claims): a job that references an
environment presents `repo:OWNER/REPO:environment:NAME`; otherwise a pull_request run presents
`repo:OWNER/REPO:pull_request` and a branch run `repo:OWNER/REPO:ref:refs/heads/BRANCH`. Repositories created after
July 15, 2026 (or opted in) use immutable subjects, `repo:OWNER@OWNER_ID/REPO@REPO_ID:...`.
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
    def subject_prefix(self) -> str:
        if self.owner_id is None:
            return f"repo:{self.owner}/{self.name}"
        return f"repo:{self.owner}@{self.owner_id}/{self.name}@{self.repository_id}"

    def pull_request(self) -> str:
        return f"{self.subject_prefix}:pull_request"

    def branch(self, branch: str = DEPLOY_BRANCH) -> str:
        return f"{self.subject_prefix}:ref:refs/heads/{branch}"

    def environment(self, environment: str = DEPLOY_ENVIRONMENT) -> str:
        return f"{self.subject_prefix}:environment:{environment}"


def provider_arn(account_id: str, partition: str = "aws") -> str:
    return f"arn:{partition}:iam::{account_id}:oidc-provider/{ISSUER_HOST}"


def trust_policy(account_id: str, subjects: list[str], partition: str = "aws") -> dict[str, Any]:
    """A role's trust policy: GitHub's OIDC tokens for our audience and exactly these subjects (no wildcards)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "GitHubActionsOfThisRepository",
                "Effect": "Allow",
                "Principal": {"Federated": provider_arn(account_id, partition)},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {
                    "StringEquals": {f"{ISSUER_HOST}:aud": AUDIENCE, f"{ISSUER_HOST}:sub": sorted(subjects)},
                },
            }
        ],
    }


def preview_subjects(repository: Repository) -> list[str]:
    """Pull requests of this repository, and the preview a push to main runs before the deploy's approval."""
    return [repository.pull_request(), repository.branch()]


def deploy_subjects(repository: Repository) -> list[str]:
    """Only jobs of the approved `pulumi-up` environment, whose branches the environment restricts to main."""
    return [repository.environment()]
