"""What the workflows must do: preview every changed stack with the policy pack and comment on the PR, post the
reviewer's summary, `pulumi up` only behind an approved environment, and reach AWS only through OIDC."""

from __future__ import annotations

import re

from infra.stack_files import stack_names
from tests.workflows.workflows import ROOT, WORKFLOWS, expressions, load, steps, uses, workflow_files

PR = load(WORKFLOWS / "pull-request.yml")
DEPLOY = load(WORKFLOWS / "deploy.yml")
DOCS = (ROOT / "docs" / "ci.md").read_text()


def _pulumi_step(workflow: dict) -> tuple[str, dict, dict]:
    (found,) = uses(workflow, "pulumi/actions")
    return found


def test_pull_requests_trigger_the_preview_workflow() -> None:
    assert "pull_request" in PR["on"]


def test_the_preview_runs_for_each_changed_stack_with_the_policy_pack_and_comments_on_the_pr() -> None:
    _, job, step = _pulumi_step(PR)
    given = step["with"]
    assert (given["command"], given["policyPacks"], given["comment-on-pr"]) == ("preview", "policy", True)
    assert job["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.stacks.outputs.stacks) }}"
    assert job["permissions"]["pull-requests"] == "write"


def test_the_changed_stacks_come_from_the_changed_stacks_tool() -> None:
    runs = [s["run"] for _, _, s in steps(PR) if "run" in s]
    assert any("python -m tools.changed_stacks" in r and "$GITHUB_OUTPUT" in r for r in runs)


def test_unit_tests_run_on_pull_requests() -> None:
    runs = [step.get("run") or "" for step in PR["jobs"]["tests"]["steps"]]
    assert any(run.startswith("make lint test-fast") for run in runs)


def test_the_reviewers_summary_is_posted_as_a_pr_comment() -> None:
    job = PR["jobs"]["summary"]
    assert any("python -m tools.pr_summary" in s.get("run", "") for s in job["steps"])
    (script,) = [s["with"]["script"] for s in job["steps"] if s.get("uses", "").startswith("actions/github-script")]
    assert "createComment" in script and "updateComment" in script
    assert job["permissions"]["pull-requests"] == "write"


def test_main_deploys_one_stack_with_pulumi_up_behind_an_environment() -> None:
    assert DEPLOY["on"]["push"]["branches"] == ["main"]
    _, job, step = _pulumi_step(DEPLOY)
    assert step["with"]["command"] == "up" and step["with"]["policyPacks"] == "policy"
    assert job["environment"]["name"] == "pulumi-up"
    assert job["concurrency"]["cancel-in-progress"] is False  # never cancel an update half done


def test_the_stacks_offered_for_a_manual_deploy_are_the_repositorys_stacks() -> None:
    assert DEPLOY["on"]["workflow_dispatch"]["inputs"]["stack"]["options"] == stack_names()


def test_aws_is_reached_only_by_assuming_a_role_through_oidc() -> None:
    for workflow in (PR, DEPLOY):
        for _, job, step in uses(workflow, "aws-actions/configure-aws-credentials"):
            assert step["with"]["role-to-assume"].startswith("${{ vars.AWS_")
            assert not {"aws-access-key-id", "aws-secret-access-key", "aws-session-token"} & set(step["with"])
            assert job["permissions"]["id-token"] == "write"


def test_no_long_lived_aws_keys_appear_anywhere() -> None:
    for path in workflow_files():
        assert not re.search(r"AWS_(SECRET_)?ACCESS_KEY|aws-(secret-)?access-key", path.read_text(), re.IGNORECASE)


def test_only_the_pulumi_token_is_a_secret_and_every_variable_is_documented() -> None:
    found = {e for w in (PR, DEPLOY) for e in expressions(w)}
    secrets = {m for e in found for m in re.findall(r"secrets\.([A-Z_]+)", e)}
    variables = {m for e in found for m in re.findall(r"vars\.([A-Z_]+)", e)}
    assert secrets == {"PULUMI_ACCESS_TOKEN"}
    assert variables and all(f"`{name}`" in DOCS for name in secrets | variables)


def test_workflows_grant_only_read_access_by_default() -> None:
    assert PR["permissions"] == DEPLOY["permissions"] == {"contents": "read"}


def test_the_pulumi_cli_matches_the_sdk_pin() -> None:
    pin = re.search(r"^pulumi==(\S+)$", (ROOT / "requirements.txt").read_text(), re.MULTILINE).group(1)
    assert {_pulumi_step(w)[2]["with"]["pulumi-version"] for w in (PR, DEPLOY)} == {pin}


def test_what_the_steps_run_exists() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for workflow in (PR, DEPLOY):
        for _, _, step in steps(workflow):
            run = step.get("run", "")
            for module in re.findall(r"python -m ([\w.]+)", run):
                if module in ("venv", "pip"):
                    continue
                assert (ROOT / (module.replace(".", "/") + ".py")).is_file(), module
            for targets in re.findall(r"^make ([\w -]+)$", run, re.MULTILINE):
                for target in targets.split():
                    assert re.search(rf"^{target}:", makefile, re.MULTILINE), target
            for path in re.findall(r"-r ([\w/.-]+\.txt)", run):
                assert (ROOT / path).is_file(), path
    assert (ROOT / "policy" / "PulumiPolicy.yaml").is_file()
