"""`python -m workloads --stack NAME`: every object the project builds itself, as YAML, from the builders
the stack uses."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from stack.files import load_stack_config, stack_names
from stack.paths import PROJECT_ROOT
from workloads.platform.objects import platform_objects
from workloads.render import all_objects, job_objects, render


def run_render(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workloads", *args], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120
    )


def test_the_cli_prints_every_object_as_yaml() -> None:
    result = run_render("--stack", "p5-16")
    assert result.returncode == 0, result.stderr
    printed = list(yaml.safe_load_all(result.stdout))
    assert printed == all_objects(load_stack_config("p5-16"))


@pytest.mark.parametrize("stack", stack_names())
def test_render_prints_the_platform_objects_then_the_jobs(stack: str) -> None:
    config = load_stack_config(stack)
    printed = list(yaml.safe_load_all(render(config)))
    platform = platform_objects(config)
    assert printed[: len(platform)] == platform
    assert printed[len(platform) :] == job_objects(config)


def test_render_includes_the_training_job() -> None:
    kinds = {o["kind"] for o in all_objects(load_stack_config("dev"))}
    assert "PyTorchJob" in kinds


def test_an_unknown_stack_is_refused_with_the_known_ones() -> None:
    result = run_render("--stack", "no-such-stack")
    assert result.returncode == 2
    assert "dev" in result.stderr
