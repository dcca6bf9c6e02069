"""CODEOWNERS covers the workflows, the tools they run with credentials, the policy pack and the IAM code, with the
last matching rule winning as GitHub reads the file (GitHub docs, "About code owners")."""

from __future__ import annotations

import re

import pytest

from tests.workflows.workflows import ROOT

CODEOWNERS = ROOT / ".github" / "CODEOWNERS"
OWNER = re.compile(r"^@[\w-]+(/[\w.-]+)?$")
MUST_BE_OWNED = [
    ".github/workflows/pull-request.yml",
    ".github/workflows/deploy.yml",
    ".github/CODEOWNERS",
    "policy/pack.py",
    "policy/PulumiPolicy.yaml",
    "ci/deploy_policy.py",
    "ci/preview_policy.py",
    "infra/iam.py",
    "infra/role_boundary.py",
    "tools/preview_comment.py",
    "tools/changed_stacks.py",
]


def rules() -> list[tuple[str, list[str]]]:
    found = []
    for line in CODEOWNERS.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            pattern, *owners = line.split()
            found.append((pattern, owners))
    return found


def owners_of(path: str) -> list[str]:
    """Owners of the last rule that matches, for the anchored file and directory patterns this file uses."""
    owners: list[str] = []
    for pattern, rule_owners in rules():
        anchored = pattern.lstrip("/")
        if (anchored.endswith("/") and path.startswith(anchored)) or path == anchored:
            owners = rule_owners
    return owners


@pytest.mark.parametrize("path", MUST_BE_OWNED)
def test_the_path_has_a_code_owner(path: str) -> None:
    assert (ROOT / path).exists(), path
    assert owners_of(path), path


def test_every_rule_is_anchored_and_names_a_user_or_team() -> None:
    for pattern, owners in rules():
        assert pattern.startswith("/"), pattern
        assert owners and all(OWNER.match(o) for o in owners), (pattern, owners)


def test_ordinary_code_is_not_gated() -> None:
    assert owners_of("trainer/train.py") == [] and owners_of("workloads/job/manifest.py") == []
