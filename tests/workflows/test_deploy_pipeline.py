"""The pipeline against a hostile branch: a pull request's token cannot create a stack (only the approved deploy
does), the deploy token is bound to the environment, main and the deploy workflow's events, the update runs the
plan the reviewer approved, the image's registry login happens on the runner, and every install is hash-pinned."""

from __future__ import annotations

import re

from ci.github_oidc import DEPLOY_EVENTS, PULL_REQUEST_EVENT
from tests.workflows.workflows import ROOT, WORKFLOWS, expressions, load, steps, uses

PR = load(WORKFLOWS / "pull-request.yml")
DEPLOY = load(WORKFLOWS / "deploy.yml")
DEPLOY_ENV = "pulumi-up"
OIDC_CHOSEN = "vars.PULUMI_DEPLOY_OIDC == 'true'"
STATIC_CHOSEN = "vars.PULUMI_DEPLOY_OIDC != 'true'"


def _in_environment(job: dict) -> bool:
    return job.get("environment", {}).get("name") == DEPLOY_ENV


def _runs(job: dict) -> list[tuple[int, str]]:
    return [(i, s["run"]) for i, s in enumerate(job["steps"]) if "run" in s]


def _index_of(job: dict, action: str, **given: str) -> int:
    """The one step of `job` using `action` whose `with` has these values."""
    (found,) = [
        i
        for i, s in enumerate(job["steps"])
        if str(s.get("uses", "")).split("@")[0] == action
        and all(s.get("with", {}).get(k) == v for k, v in given.items())
    ]
    return found


# --- stacks: created only by the approved deploy ----------------------------------------------------------------


def test_no_workflow_creates_a_stack_on_the_fly() -> None:
    for workflow in (PR, DEPLOY):
        for _, _, step in uses(workflow, "pulumi/actions"):
            assert "upsert" not in step.get("with", {})


def test_only_a_job_of_the_approved_environment_runs_stack_init() -> None:
    inits = [
        (job_id, job) for w in (PR, DEPLOY) for job_id, job in w["jobs"].items() if "pulumi stack init" in str(job)
    ]
    assert [job_id for job_id, _ in inits] == ["create"]
    (_, create) = inits[0]
    assert _in_environment(create) and create["needs"] == "stack"
    assert "needs.stack.outputs.exists == 'false'" in create["if"]


def test_a_pull_request_previews_only_stacks_that_exist() -> None:
    job = PR["jobs"]["preview"]
    (check,) = [s for s in job["steps"] if "python -m ci.stack_exists" in s.get("run", "")]
    (preview,) = [s for s in job["steps"] if str(s.get("uses", "")).startswith("pulumi/actions@")]
    assert preview["if"] == f"steps.{check['id']}.outputs.exists == 'true'"
    note = next(s for s in job["steps"] if s.get("if") == f"steps.{check['id']}.outputs.exists == 'false'")
    assert "$GITHUB_STEP_SUMMARY" in note["run"]


def test_the_stack_check_runs_with_the_preview_token() -> None:
    job = DEPLOY["jobs"]["stack"]
    auth = _index_of(job, "pulumi/auth-actions", scope="team:${{ vars.PULUMI_PREVIEW_TEAM }}")
    (check,) = [i for i, run in _runs(job) if "python -m ci.stack_exists" in run]
    assert auth < check and not _in_environment(job)
    assert job["outputs"]["exists"] == "${{ steps.exists.outputs.exists }}"


def test_a_new_stack_is_previewed_after_its_creation_and_before_its_update() -> None:
    jobs = DEPLOY["jobs"]
    assert set(jobs["preview"]["needs"]) == {"stack", "create"} and set(jobs["up"]["needs"]) == {"stack", "preview"}
    # A skipped `create` (the stack exists) must not skip the preview, and a failed one must stop it.
    assert "!cancelled()" in jobs["preview"]["if"]
    assert "(needs.create.result == 'success' || needs.create.result == 'skipped')" in jobs["preview"]["if"]
    assert "!cancelled()" in jobs["up"]["if"] and "needs.preview.result == 'success'" in jobs["up"]["if"]


# --- the approved plan is what runs -----------------------------------------------------------------------------


def test_the_preview_saves_its_plan_and_the_update_runs_exactly_that_plan() -> None:
    preview, up = DEPLOY["jobs"]["preview"], DEPLOY["jobs"]["up"]
    (shown,) = [s for _, job, s in uses(DEPLOY, "pulumi/actions") if job is preview]
    saved = shown["with"]["plan"]
    (upload,) = [s for _, job, s in uses(DEPLOY, "actions/upload-artifact") if job is preview]
    assert upload["with"]["path"] == saved and upload["with"]["if-no-files-found"] == "error"
    (download,) = [s for _, job, s in uses(DEPLOY, "actions/download-artifact") if job is up]
    assert download["with"]["name"] == upload["with"]["name"]
    up_step = next(s for _, job, s in uses(DEPLOY, "pulumi/actions") if job is up and s["with"].get("command") == "up")
    assert up_step["with"]["plan"] == f"{download['with']['path']}/{saved.rsplit('/', 1)[1]}"
    assert up["steps"].index(download) < up["steps"].index(up_step)
    assert up_step["with"]["policyPacks"] == shown["with"]["policyPacks"] == "policy"


def test_the_registry_login_happens_on_the_runner_before_the_update() -> None:
    job = DEPLOY["jobs"]["up"]
    (login,) = [i for i, run in _runs(job) if "docker login" in run]
    run = job["steps"][login]["run"]
    assert "aws ecr get-login-password --region" in run and "--username AWS --password-stdin" in run
    assert '.dkr.ecr.$region.amazonaws.com"' in run
    assert login < _index_of(job, "pulumi/actions", command="up")
    assert login > _index_of(job, "aws-actions/configure-aws-credentials")


# --- the deploy token -------------------------------------------------------------------------------------------


def test_every_deploy_job_gets_its_token_one_way_chosen_by_a_variable() -> None:
    for job_id, job in DEPLOY["jobs"].items():
        if not _in_environment(job):
            continue
        exchange = _index_of(job, "pulumi/auth-actions")
        static = next(i for i, run in _runs(job) if "PULUMI_ACCESS_TOKEN=" in run)
        assert job["steps"][exchange]["if"] == OIDC_CHOSEN and job["steps"][static]["if"] == STATIC_CHOSEN, job_id
        assert job["steps"][exchange]["with"]["scope"] == "team:${{ vars.PULUMI_DEPLOY_TEAM }}"
        assert job["steps"][static]["env"] == {"TOKEN": "${{ secrets.PULUMI_DEPLOY_TOKEN }}"}
        pulumi = [i for i, s in enumerate(job["steps"]) if str(s.get("uses", "")).startswith("pulumi/actions@")]
        assert max(exchange, static) < min(pulumi), job_id


def test_jobs_outside_the_environment_never_ask_for_the_deploy_team() -> None:
    for workflow in (PR, DEPLOY):
        for job_id, job in workflow["jobs"].items():
            if not _in_environment(job):
                for step in job["steps"]:
                    assert "PULUMI_DEPLOY" not in " ".join(expressions(step)), job_id


def test_the_token_subjects_name_the_events_that_start_the_workflows() -> None:
    # ci/github_oidc.py's trust policies admit exactly these events; another trigger would get no credentials.
    assert set(DEPLOY["on"]) == set(DEPLOY_EVENTS)
    assert set(PR["on"]) == {PULL_REQUEST_EVENT}


# --- hash-pinned installs ---------------------------------------------------------------------------------------

PIP_INSTALL = re.compile(r"pip install ([^\n|&;]*)")


def _pip_installs() -> list[str]:
    found = [m for w in (PR, DEPLOY) for _, _, s in steps(w) for m in PIP_INSTALL.findall(s.get("run", ""))]
    found += PIP_INSTALL.findall((ROOT / "Makefile").read_text())
    found += PIP_INSTALL.findall((ROOT / "docker" / "Dockerfile").read_text())  # the trainer image, built by `up`
    return found


def test_every_install_is_from_a_lock_with_hashes() -> None:
    installs = _pip_installs()
    assert len(installs) >= 9
    for arguments in installs:
        assert "--require-hashes" in arguments and re.search(r"-r \S+\.lock\b", arguments), arguments


def test_the_workflows_cache_on_the_locks() -> None:
    for workflow in (PR, DEPLOY):
        for _, _, step in uses(workflow, "actions/setup-python"):
            paths = step["with"].get("cache-dependency-path")
            if paths is not None:
                assert all(p.endswith(".lock") for p in paths.split()), paths
