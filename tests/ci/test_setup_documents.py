"""The `pulumi-up` environment's rules and the one-time setup command (python -m ci)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ci.deploy_policy import Account
from ci.environment import Reviewer, branch_policy, environment_settings
from tests.workflows.workflows import ROOT


def test_the_environment_needs_a_reviewer_who_did_not_start_the_run() -> None:
    settings = environment_settings([Reviewer.parse("Team:42")])
    assert settings["prevent_self_review"] is True
    assert settings["reviewers"] == [{"type": "Team", "id": 42}]


def test_administrators_cannot_bypass_the_environments_rules() -> None:
    assert environment_settings([Reviewer.parse("Team:42")])["can_admins_bypass"] is False


def test_the_environment_admits_only_main() -> None:
    settings = environment_settings([Reviewer.parse("User:7")])
    assert settings["deployment_branch_policy"] == {"protected_branches": False, "custom_branch_policies": True}
    assert branch_policy() == {"name": "main", "type": "branch"}


@pytest.mark.parametrize("count", [0, 7])
def test_github_takes_one_to_six_reviewers(count: int) -> None:
    with pytest.raises(ValueError):
        environment_settings([Reviewer("User", i) for i in range(count)])


def test_a_reviewer_is_a_team_or_user_id() -> None:
    with pytest.raises(ValueError):
        Reviewer.parse("octocat")


def test_the_command_writes_every_document_and_prints_the_commands(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ci",
            "--repository",
            "acme/fsdp-eks",
            "--account-id",
            "123456789012",
            "--reviewer",
            "Team:42",
            "--pulumi-org",
            "acme",
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    written = {p.name: json.loads(p.read_text()) for p in tmp_path.glob("*.json")}
    assert written["oidc-subject-customization.json"]["include_claim_keys"] == ["repo", "context", "ref", "event_name"]
    assert set(written) == {
        "preview-role-trust.json",
        "preview-role-policy.json",
        "deploy-role-trust.json",
        "deploy-role-policy.json",
        "role-boundary-policy.json",
        "stack-buckets-rcp.json",
        "pulumi-up-environment.json",
        "pulumi-up-branch-policy.json",
        "oidc-subject-customization.json",
        "pulumi-oidc-policies.json",
    }
    for name in written.keys() - {"pulumi-oidc-policies.json"}:
        assert f"file://{tmp_path}/{name}" in result.stdout or f"--input {tmp_path}/{name}" in result.stdout, name
    assert f"one allow policy per entry of {tmp_path}/pulumi-oidc-policies.json" in result.stdout
    assert "rolePermissionsBoundary" in result.stdout
    assert f"{Account('123456789012').cluster_name_prefix}*" in result.stdout  # the clusters the deploy role manages
    assert "create-policy --type RESOURCE_CONTROL_POLICY" in result.stdout
    assert "attach-policy --target-id 123456789012" in result.stdout
    assert "--policy-type RESOURCE_CONTROL_POLICY" in result.stdout
    assert "# aws accessanalyzer create-analyzer" in result.stdout  # the fallback, commented out


def test_an_account_id_must_be_twelve_digits(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ci",
            "--repository",
            "acme/fsdp-eks",
            "--account-id",
            "1234",
            "--reviewer",
            "Team:42",
            "--pulumi-org",
            "acme",
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0 and "12 digits" in result.stderr
