"""Pulumi Cloud's side of the OIDC exchange: the authorization policies of the GitHub issuer, one per token subject.

pulumi/auth-actions exchanges a job's GitHub token for a Pulumi team token; Pulumi Cloud issues it only when an
**allow** policy of the issuer matches (Pulumi docs, "OIDC issuers": a new issuer has none; each policy names its
token type and, for team tokens, the team; its rules match claims, `aud` against `urn:pulumi:org:<org>`). Team tokens
through OIDC need the Enterprise or Business Critical edition (same page, Token types by edition: Individual has
personal tokens only, Team personal and organization tokens); an organization token carries only the `admin`
permission (Pulumi Service provider, api/auth Policy), far more than a deploy needs, so a Team-edition organization
keeps the static deploy token of the `pulumi-up` environment instead (docs/ci.md).

Rule values take wildcards: `*` any run of characters, `?` zero or one, and `.` exactly one character (same page). A
`.` in the repository's name therefore matches any one character there: a subject with one is a little wider in
Pulumi Cloud than in AWS, where only `*` and `?` are wildcards.
"""

from __future__ import annotations

from typing import Any

from ci.github_oidc import Repository, deploy_subjects, preview_subjects

PREVIEW_TEAM = "fsdp-eks-preview"
DEPLOY_TEAM = "fsdp-eks-deploy"


def audience(organization: str) -> str:
    """The `aud` pulumi/auth-actions requests: urn:pulumi:org:<organization>."""
    return f"urn:pulumi:org:{organization}"


def team_policy(organization: str, team: str, subject: str) -> dict[str, Any]:
    return {
        "decision": "allow",
        "tokenType": "team",
        "teamName": team,
        "rules": {"aud": audience(organization), "sub": subject},
    }


def oidc_policies(
    repository: Repository, organization: str, preview_team: str = PREVIEW_TEAM, deploy_team: str = DEPLOY_TEAM
) -> list[dict[str, Any]]:
    """The previews' team for the preview subjects, the deploy team for the approved environment's subjects only:
    the same subjects the AWS roles trust (ci/github_oidc.py)."""
    return [team_policy(organization, preview_team, s) for s in preview_subjects(repository)] + [
        team_policy(organization, deploy_team, s) for s in deploy_subjects(repository)
    ]
