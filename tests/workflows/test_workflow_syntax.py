"""The workflows are valid GitHub Actions workflows: the syntax against a JSON schema of the workflow keys we use,
and every action's `with:` inputs against what that action declares (tests/workflows/action_inputs.json)."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import jsonschema
import pytest

from tests.workflows.workflows import ACTIONS, SCHEMA, expressions, load, steps, workflow_files

FILES = workflow_files()


def test_the_schema_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_there_are_two_workflows() -> None:
    assert [p.name for p in FILES] == ["deploy.yml", "pull-request.yml"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_the_workflow_matches_the_schema(path: Path) -> None:
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in jsonschema.Draft202012Validator(SCHEMA).iter_errors(load(path))
    ]
    assert errors == []


@pytest.mark.parametrize(
    "mutate",
    [
        lambda w: w["jobs"][next(iter(w["jobs"]))].update({"runs_on": "ubuntu-24.04"}),  # misspelt key
        lambda w: w["jobs"][next(iter(w["jobs"]))]["steps"][0].update({"run": "true"}),  # uses and run at once
        lambda w: w.update({"permissions": {"id-token": "read"}}),  # id-token takes write or none
        lambda w: w.pop("on"),
    ],
    ids=["misspelt-key", "uses-and-run", "id-token-read", "no-trigger"],
)
def test_the_schema_rejects_broken_workflows(mutate) -> None:
    workflow = copy.deepcopy(load(FILES[0]))
    mutate(workflow)
    assert list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(workflow))


def test_on_is_read_as_a_key_not_a_boolean() -> None:
    assert all("on" in load(p) and True not in load(p) for p in FILES)


def _action_steps():
    return [(p.name, job_id, step) for p in FILES for job_id, _, step in steps(load(p)) if "uses" in step]


@pytest.mark.parametrize("workflow,job,step", _action_steps(), ids=lambda v: v if isinstance(v, str) else v["uses"])
def test_every_action_is_pinned_to_a_version_whose_inputs_were_checked(workflow: str, job: str, step: dict) -> None:
    assert step["uses"] in ACTIONS, f"{workflow}/{job}: {step['uses']} is not in action_inputs.json"


# `uses: owner/name@<40 hex> # vX.Y.Z`: a tag can be moved to other code, a commit cannot.
PINNED_USES = re.compile(
    r"^\s*(?:-\s+)?uses:\s*(?P<ref>[\w.-]+/[\w.-]+@(?P<sha>[0-9a-f]{40}))\s+#\s*(?P<version>v[\d.]+)\s*$"
)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_action_is_pinned_by_full_commit_sha_with_its_version_in_a_comment(path: Path) -> None:
    lines = [line for line in path.read_text().splitlines() if re.match(r"^\s*(-\s+)?uses:", line)]
    assert lines
    for line in lines:
        pinned = PINNED_USES.match(line)
        assert pinned, line
        action = ACTIONS[pinned["ref"]]
        assert (action["commit"], action["version"]) == (pinned["sha"], pinned["version"]), line


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_checkout_leaves_the_token_in_the_workspace(path: Path) -> None:
    checkouts = [s for _, _, s in steps(load(path)) if s.get("uses", "").startswith("actions/checkout@")]
    assert checkouts and all(s.get("with", {}).get("persist-credentials") is False for s in checkouts)


@pytest.mark.parametrize("workflow,job,step", _action_steps(), ids=lambda v: v if isinstance(v, str) else v["uses"])
def test_every_with_input_is_one_the_action_declares(workflow: str, job: str, step: dict) -> None:
    action, given = ACTIONS[step["uses"]], step.get("with", {})
    assert set(given) <= set(action["inputs"]), set(given) - set(action["inputs"])
    assert set(action["required"]) <= set(given)
    for name, needed in action.get("required_with", {}).items():
        if name in given:
            assert set(needed) <= set(given), f"{name} needs {needed}"
    for name, allowed in action.get("values", {}).items():
        if name in given:
            assert given[name] in allowed
    for name in set(action["booleans"]) & set(given):
        assert given[name] in (True, False) or expressions(given[name]), f"{name}: {given[name]!r}"


def test_every_job_referenced_through_needs_is_a_needed_job() -> None:
    for path in FILES:
        workflow = load(path)
        for job_id, job in workflow["jobs"].items():
            needs = job.get("needs", [])
            needs = [needs] if isinstance(needs, str) else needs
            assert set(needs) <= set(workflow["jobs"])
            for expression in expressions(job):
                for word in expression.replace("(", " ").replace(")", " ").split():
                    if word.startswith("needs."):
                        assert word.split(".")[1] in needs, f"{path.name}/{job_id}: {word}"


def test_every_step_output_read_comes_from_an_earlier_step_of_the_job() -> None:
    for path in FILES:
        for job_id, job in load(path)["jobs"].items():
            seen: set[str] = set()
            for step in job["steps"]:
                for expression in expressions(step):
                    for word in expression.split():
                        if word.startswith("steps."):
                            assert word.split(".")[1] in seen, f"{path.name}/{job_id}: {word}"
                if "id" in step:
                    seen.add(step["id"])
            for expression in expressions(job.get("outputs", {})):
                assert expression.split(".")[1] in seen
