"""The HF token never appears in plain text: not in a rendered object, not in a resource input outside Pulumi's
secret wrapper, not in a stack output, not in the program's log. Checked with a sentinel token value."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest
import yaml

from stack.files import load_stack_config, stack_names
from tests.harness.pulumi_program import run_program
from workloads.job.manifest import hf_token_secret, job_objects
from workloads.job.spec import job_spec

from .job_component_program import run_components

SENTINEL = "hf_SENTINEL_do_not_leak_8c1f2e"
# Pulumi's wire marker for a secret value: {SIG_KEY: SECRET_SIG, "value": ...} (pulumi.runtime.rpc).
SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"


def without_secrets(value: Any) -> Any:
    """`value` with every secret-wrapped part replaced by a marker."""
    if isinstance(value, dict):
        if value.get(SIG_KEY) == SECRET_SIG:
            return "[secret]"
        return {k: without_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_secrets(v) for v in value]
    return value


@cache
def dev_components() -> dict[str, Any]:
    return run_components("dev", hf_token=SENTINEL)


@pytest.mark.parametrize("stack", stack_names())
def test_rendered_objects_never_contain_the_token(stack: str) -> None:
    rendered = yaml.safe_dump_all(job_objects(load_stack_config(stack), image="example/trainer:1"))
    assert SENTINEL not in rendered
    assert "stringData" not in rendered and "\ndata:" not in rendered


def test_the_secret_carries_the_token_only_when_given_it() -> None:
    spec = job_spec(load_stack_config("dev"), "example/trainer:1")
    assert "stringData" not in hf_token_secret(spec)
    assert hf_token_secret(spec, SENTINEL)["stringData"] == {"token": SENTINEL}


def test_the_token_reaches_the_cluster_only_as_a_pulumi_secret() -> None:
    resources = dev_components()["resources"]
    (secret,) = [r for r in resources if r["type"] == "kubernetes:core/v1:Secret"]
    wrapped = secret["inputs"]["stringData"]
    assert wrapped[SIG_KEY] == SECRET_SIG and wrapped["value"] == {"token": SENTINEL}
    assert SENTINEL not in json.dumps(without_secrets(resources))


def test_the_token_never_reaches_the_log() -> None:
    assert SENTINEL not in dev_components()["log"]


def test_the_token_never_reaches_a_stack_output() -> None:
    run = run_program("dev", secrets={"fsdp-eks:hfToken": SENTINEL})
    assert run.error is None, run.error
    assert run.of_type("fsdp-eks:workloads:TrainingJob"), "__main__.py composes no TrainingJob"
    shown = {name: value for name, value in run.outputs.items() if not name.endswith(".__plain")}
    assert SENTINEL not in json.dumps(shown)
    assert SENTINEL not in json.dumps(without_secrets([r.inputs for r in run.resources]))
