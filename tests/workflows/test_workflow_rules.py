"""What the workflows must do: preview every changed stack with the policy pack and comment on the PR (also when the
preview fails), post the reviewer's summary, `pulumi up` only behind the approved environment after a preview of
the same commit, and keep every credential where it belongs: a pull request's code gets a preview-scoped Pulumi
token and the read-only role, never the deploy token, and no AWS key exists at all. How stacks are created, the
approved plan carried to `up`, and the installs: test_deploy_pipeline.py."""

from __future__ import annotations

import re

from stack.files import stack_names
from tests.harness.text import must_search
from tests.workflows.workflows import ROOT, WORKFLOWS, expressions, load, steps, uses, workflow_files

PR = load(WORKFLOWS / "pull-request.yml")
DEPLOY = load(WORKFLOWS / "deploy.yml")
DOCS = (ROOT / "docs" / "ci.md").read_text()
TEAM_TOKEN = "urn:pulumi:token-type:access_token:team"


def _only(found: list) -> tuple[str, dict, dict]:
    assert len(found) == 1, [f[0] for f in found]
    return found[0]


def _job_steps(job: dict, action: str) -> list[dict]:
    return [s for s in job["steps"] if str(s.get("uses", "")).split("@")[0] == action]


def _index(job: dict, step: dict) -> int:
    return next(i for i, s in enumerate(job["steps"]) if s is step)


def _command(step: dict) -> str | None:
    """The Pulumi command a pulumi/actions step runs; None for a step that only installs the CLI."""
    return step.get("with", {}).get("command")


# --- the pull request's preview -------------------------------------------------------------------------------


def test_pull_requests_trigger_the_preview_workflow() -> None:
    assert "pull_request" in PR["on"] and "pull_request_target" not in PR["on"]


def test_the_preview_runs_for_each_changed_stack_with_the_policy_pack_and_comments_on_the_pr() -> None:
    _, job, step = _only(uses(PR, "pulumi/actions"))
    given = step["with"]
    assert (given["command"], given["policyPacks"], given["comment-on-pr"]) == ("preview", "policy", True)
    assert job["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.stacks.outputs.stacks) }}"
    assert job["permissions"]["pull-requests"] == "write"


def test_a_long_diff_cannot_cut_off_the_policy_results() -> None:
    previews = [
        s for _, _, s in uses(PR, "pulumi/actions") + uses(DEPLOY, "pulumi/actions") if _command(s) == "preview"
    ]
    assert len(previews) == 2  # an `up` posts no comment or summary to cut
    assert all(step["with"]["always-include-summary"] is True for step in previews)


def test_a_failed_preview_updates_the_pr_comment_with_its_violations() -> None:
    job = PR["jobs"]["preview"]
    (preview,) = _job_steps(job, "pulumi/actions")
    report = next(s for s in job["steps"] if "tools.preview_comment" in s.get("run", ""))
    (post,) = _job_steps(job, "actions/github-script")
    assert report["if"] == f"failure() && steps.{preview['id']}.outcome == 'failure'"
    assert "--policy-pack policy" in report["run"] and "$GITHUB_STEP_SUMMARY" in report["run"]
    assert post["if"] == f"failure() && steps.{report['id']}.outcome == 'success'"
    script = post["with"]["script"]
    assert "updateComment" in script and "createComment" in script and "<summary>Pulumi report</summary>" in script
    assert _index(job, preview) < _index(job, report) < _index(job, post)


def test_the_changed_stacks_come_from_the_changed_stacks_tool() -> None:
    runs = [s["run"] for _, _, s in steps(PR) if "run" in s]
    assert any("python -m tools.changed_stacks" in r and "$GITHUB_OUTPUT" in r for r in runs)


def test_unit_tests_run_on_pull_requests() -> None:
    runs = [step.get("run") or "" for step in PR["jobs"]["tests"]["steps"]]
    assert any(run.startswith("make lint test-fast") for run in runs)


def test_the_program_under_mocks_runs_on_pull_requests_too() -> None:
    """`make test-fast` leaves out the program's runs under the mocks (the `program` tier): a PR runs them as well."""
    runs = [step.get("run") or "" for step in PR["jobs"]["tests"]["steps"]]
    assert any(run.startswith("make ") and "test-program" in run.split() for run in runs)


def test_forks_are_not_previewed_with_this_repositorys_credentials() -> None:
    condition = PR["jobs"]["preview"]["if"]
    assert "github.event.pull_request.head.repo.full_name == github.repository" in condition


def test_the_reviewers_summary_is_a_comment_on_own_prs_and_a_job_summary_on_forks() -> None:
    job = PR["jobs"]["summary"]
    same_repo = "github.event.pull_request.head.repo.full_name == github.repository"
    summarize = next(s for s in job["steps"] if "python -m tools.pr_summary" in s.get("run", ""))
    assert "$GITHUB_STEP_SUMMARY" in summarize["run"] and "if" not in summarize
    (post,) = _job_steps(job, "actions/github-script")
    assert post["if"] == same_repo
    assert "createComment" in post["with"]["script"] and "updateComment" in post["with"]["script"]
    fork_note = next(s for s in job["steps"] if s.get("if") == same_repo.replace("==", "!="))
    assert "$GITHUB_STEP_SUMMARY" in fork_note["run"]


# --- tokens and roles -----------------------------------------------------------------------------------------


def test_pull_requests_read_no_secret() -> None:
    assert not [e for e in expressions(PR) if "secrets." in e]


def test_previews_get_a_preview_scoped_team_token_through_oidc() -> None:
    for workflow, job_id in ((PR, "preview"), (DEPLOY, "preview")):
        job = workflow["jobs"][job_id]
        (auth,) = _job_steps(job, "pulumi/auth-actions")
        (preview,) = _job_steps(job, "pulumi/actions")
        assert auth["with"]["requested-token-type"] == TEAM_TOKEN
        assert auth["with"]["scope"] == "team:${{ vars.PULUMI_PREVIEW_TEAM }}"
        assert auth["with"]["organization"] == "${{ vars.PULUMI_ORG }}"
        assert auth["with"].get("export-environment-variables", True) is True  # PULUMI_ACCESS_TOKEN for the CLI
        assert _index(job, auth) < _index(job, preview) and "env" not in preview
        assert job["permissions"]["id-token"] == "write" and "environment" not in job


def test_the_deploy_token_is_read_only_in_the_pulumi_up_environment() -> None:
    for workflow in (PR, DEPLOY):
        for job_id, job in workflow["jobs"].items():
            deploy_team = any("PULUMI_DEPLOY_TEAM" in e for e in expressions(job))
            if deploy_team or any("secrets." in e for e in expressions(job)):
                assert job.get("environment", {}).get("name") == "pulumi-up", job_id
    secrets = {m for e in expressions(DEPLOY) for m in re.findall(r"secrets\.([A-Z_]+)", e)}
    assert secrets == {"PULUMI_DEPLOY_TOKEN"}


def test_previews_assume_the_preview_role_and_only_the_approved_job_the_deploy_role() -> None:
    for workflow in (PR, DEPLOY):
        for job_id, job, step in uses(workflow, "aws-actions/configure-aws-credentials"):
            role = step["with"]["role-to-assume"]
            deploying = job.get("environment", {}).get("name") == "pulumi-up"
            assert role == ("${{ vars.AWS_DEPLOY_ROLE_ARN }}" if deploying else "${{ vars.AWS_PREVIEW_ROLE_ARN }}")
            assert not {"aws-access-key-id", "aws-secret-access-key", "aws-session-token"} & set(step["with"])
            assert job["permissions"]["id-token"] == "write", job_id


def test_no_long_lived_aws_keys_appear_anywhere() -> None:
    for path in workflow_files():
        assert not re.search(r"AWS_(SECRET_)?ACCESS_KEY|aws-(secret-)?access-key", path.read_text(), re.IGNORECASE)


def test_every_secret_and_variable_is_documented() -> None:
    found = {e for w in (PR, DEPLOY) for e in expressions(w)}
    names = {m for e in found for m in re.findall(r"(?:secrets|vars)\.([A-Z_]+)", e)}
    assert names and all(f"`{name}`" in DOCS for name in names), names


def test_workflows_grant_only_read_access_by_default() -> None:
    assert PR["permissions"] == DEPLOY["permissions"] == {"contents": "read"}


# --- the deploy -----------------------------------------------------------------------------------------------


def test_main_deploys_one_stack_with_pulumi_up_behind_an_environment() -> None:
    assert DEPLOY["on"]["push"]["branches"] == ["main"]
    # Two `up` steps, exactly one of which runs (tests/workflows/test_deploy_pipeline.py: with the plan, or a run
    # started by hand with `without-plan`), both in the one approved job and both with the pack.
    ups = [u for u in uses(DEPLOY, "pulumi/actions") if _command(u[2]) == "up"]
    assert len(ups) == 2 and len({id(job) for _, job, _ in ups}) == 1
    for _, _, step in ups:
        assert step["with"]["policyPacks"] == "policy"
    job = ups[0][1]
    assert job["environment"]["name"] == "pulumi-up"
    assert job["concurrency"]["cancel-in-progress"] is False  # never cancel an update half done


def test_the_approval_follows_a_preview_of_the_exact_commit() -> None:
    preview, up = DEPLOY["jobs"]["preview"], DEPLOY["jobs"]["up"]
    assert "preview" in up["needs"] and "environment" not in preview
    assert "needs.preview.result == 'success'" in up["if"]
    for job in DEPLOY["jobs"].values():
        (checkout,) = _job_steps(job, "actions/checkout")
        assert checkout["with"]["ref"] == "${{ github.sha }}"
    (shown,) = _job_steps(preview, "pulumi/actions")
    assert shown["with"]["command"] == "preview" and shown["with"]["policyPacks"] == "policy"
    assert shown["with"]["comment-on-summary"] is True  # what the reviewer reads before approving


def test_only_main_deploys() -> None:
    for job in DEPLOY["jobs"].values():
        assert "github.ref == 'refs/heads/main'" in job["if"]


def test_the_stacks_offered_for_a_manual_deploy_are_the_repositorys_stacks() -> None:
    assert DEPLOY["on"]["workflow_dispatch"]["inputs"]["stack"]["options"] == stack_names()


def test_the_pulumi_cli_matches_the_sdk_pin() -> None:
    pin = must_search(r"^pulumi==(\S+)$", (ROOT / "requirements.txt").read_text(), re.MULTILINE).group(1)
    versions = {s["with"]["pulumi-version"] for w in (PR, DEPLOY) for _, _, s in uses(w, "pulumi/actions")}
    assert versions == {pin}


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
            for path in re.findall(r"-r ([\w/.-]+\.(?:txt|lock))", run):
                assert (ROOT / path).is_file(), path
    assert (ROOT / "policy" / "PulumiPolicy.yaml").is_file()


def test_the_docs_never_tell_maintainers_to_push_fork_code_here() -> None:
    forks = DOCS[DOCS.index("## Pull requests from forks") :].split("\n## ")[0]
    assert "never by pushing the fork's code to a branch" in forks
    assert not re.search(r"(?<!never )by pushing (it|the fork's code|the change) to a branch", DOCS)


def test_every_test_the_threat_model_names_exists() -> None:
    """docs/ci.md names the test that holds each row: `tests/<file>::<test>`, or `::<test>` for the file before."""
    named, current = [], None
    for file, test, same_file in re.findall(r"`(tests/[\w/]+\.py)::(test_\w+)`|`::(test_\w+)`", DOCS):
        current = file or current
        named.append((current, test or same_file))
    assert len(named) >= 10
    for file, test in named:
        assert f"def {test}(" in (ROOT / file).read_text(), f"{file}::{test}"
