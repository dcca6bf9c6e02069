"""The pipeline against a hostile branch: a pull request's token cannot create a stack (only the approved deploy
does), the deploy token is bound to the environment, main and the deploy workflow's events, the update runs the
plan the reviewer approved, the image's registry login happens on the runner, and every install is hash-pinned."""

from __future__ import annotations

import re

import pytest

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

WITHOUT_PLAN = "without-plan"
COMPARISON = re.compile(r"^\s*([\w.-]+|'[^']*'|true|false)\s*(==|!=)\s*([\w.-]+|'[^']*'|true|false)\s*$")


def _up_steps(job: dict) -> list[int]:
    return [
        i
        for i, s in enumerate(job["steps"])
        if str(s.get("uses", "")).startswith("pulumi/actions@") and s["with"].get("command") == "up"
    ]


def _value(operand: str, context: dict) -> object:
    """A literal, or a context property (a missing one is null, as GitHub reads `inputs.x` on a push)."""
    if operand.startswith("'"):
        return operand[1:-1]
    if operand in ("true", "false"):
        return operand == "true"
    value: object = context
    for part in operand.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _loose(value: object) -> object:
    """GitHub's `==` between unlike types compares numbers: null 0, true 1, false 0 (docs, "Evaluate expressions
    in workflows and actions", Operators); strings compare case-insensitively."""
    if value is None:
        return 0
    if isinstance(value, bool):
        return int(value)
    return value.lower() if isinstance(value, str) else value


def holds(condition: str, context: dict) -> bool:
    """A step's `if:` made only of `==`/`!=` comparisons joined by `&&`, as GitHub evaluates it; anything else is
    refused, so a condition this cannot read fails the test rather than passing it."""
    results = []
    for part in condition.split("&&"):
        match = COMPARISON.match(part)
        assert match, f"not a comparison this test reads: {part!r} in {condition!r}"
        left, op, right = _loose(_value(match[1], context)), match[2], _loose(_value(match[3], context))
        results.append((left == right) if op == "==" else (left != right))
    return all(results)


RUNS = {
    "push": {"github": {"event_name": "push"}, "inputs": {}},
    "dispatch": {"github": {"event_name": "workflow_dispatch"}, "inputs": {"stack": "dev", WITHOUT_PLAN: False}},
    "dispatch without plan": {
        "github": {"event_name": "workflow_dispatch"},
        "inputs": {"stack": "dev", WITHOUT_PLAN: True},
    },
}


def test_the_without_plan_input_is_a_dispatch_only_boolean_that_defaults_to_false() -> None:
    (given,) = [event for event, spec in DEPLOY["on"].items() if WITHOUT_PLAN in ((spec or {}).get("inputs") or {})]
    assert given == "workflow_dispatch"
    declared = DEPLOY["on"]["workflow_dispatch"]["inputs"][WITHOUT_PLAN]
    assert declared["type"] == "boolean" and declared["default"] is False and declared.get("required") is not True
    assert "13765" in declared["description"]


@pytest.mark.parametrize("run", sorted(RUNS))
def test_exactly_one_update_runs_and_only_a_dispatch_can_drop_the_plan(run: str) -> None:
    job = DEPLOY["jobs"]["up"]
    running = [job["steps"][i] for i in _up_steps(job) if holds(job["steps"][i].get("if", "true == true"), RUNS[run])]
    (step,) = running
    assert step["with"]["policyPacks"] == "policy"
    assert ("plan" in step["with"]) == (run != "dispatch without plan")


def test_an_update_without_the_plan_is_approved_like_any_other_and_says_so() -> None:
    job = DEPLOY["jobs"]["up"]
    (unplanned,) = [i for i in _up_steps(job) if "plan" not in job["steps"][i]["with"]]
    condition = job["steps"][unplanned]["if"]
    assert "github.event_name == 'workflow_dispatch'" in condition and f"inputs.{WITHOUT_PLAN} == true" in condition
    assert job["environment"]["name"] == DEPLOY_ENV  # the same approval in pulumi-up
    assert "plan not enforced" in job["steps"][unplanned]["with"]["message"]
    # The run's summary says it: in the preview the reviewer reads before approving, and in the update itself
    # before it starts.
    for job_id in ("preview", "up"):
        steps_of = DEPLOY["jobs"][job_id]["steps"]
        (said,) = [i for i, s in enumerate(steps_of) if s.get("if") == condition and "run" in s]
        assert "$GITHUB_STEP_SUMMARY" in steps_of[said]["run"] and "WITHOUT" in steps_of[said]["run"]
        if job_id == "up":
            assert said < unplanned
    assert "WITHOUT the approved plan" in job["name"] and f"inputs.{WITHOUT_PLAN} == true" in job["name"]


def test_the_condition_reader_reads_github_s_loose_equality() -> None:
    assert holds("inputs.without-plan != true", RUNS["push"])  # null != true
    assert not holds("inputs.without-plan == true", RUNS["push"])
    assert holds("github.event_name == 'WORKFLOW_DISPATCH'", RUNS["dispatch"])
    with pytest.raises(AssertionError):
        holds("inputs.without-plan || true", RUNS["push"])


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
    assert login < min(_up_steps(job))
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
