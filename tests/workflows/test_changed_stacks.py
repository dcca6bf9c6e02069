"""Which stacks a pull request previews."""

from __future__ import annotations

import subprocess
import sys

import pytest

from stack import files as stack_files
from tests.harness.import_graph import MODULES, reachable
from tests.workflows.workflows import ROOT
from tools.changed_stacks import affected_stacks, stack_names
from workloads.job.image_source import IMAGE_INPUTS

STACKS = ["dev", "p5-16", "p5-2"]


def test_the_tool_sees_the_same_stacks_as_the_project() -> None:
    assert stack_names() == stack_files.stack_names()


def test_a_changed_stack_file_previews_that_stack() -> None:
    assert affected_stacks(["Pulumi.p5-16.yaml"], STACKS) == ["p5-16"]


@pytest.mark.parametrize(
    "path",
    [
        "__main__.py",
        "Pulumi.yaml",
        "requirements.txt",
        "requirements.lock",
        "infra/gpu_nodes.py",
        "workloads/job/pod.py",
        "trainer/train.py",
        "docker/Dockerfile",
        "policy/efa.py",
    ],
)
def test_a_change_to_what_every_stack_is_built_from_previews_every_stack(path: str) -> None:
    assert affected_stacks([path], STACKS) == STACKS


@pytest.mark.parametrize("path", ["requirements-trainer.lock", "docker/Dockerfile", "docker/Dockerfile.dockerignore"])
def test_a_change_to_an_input_of_the_trainer_image_previews_every_stack(path: str) -> None:
    assert affected_stacks([path], STACKS) == STACKS


@pytest.mark.parametrize("entry", IMAGE_INPUTS, ids=str)
def test_every_input_the_image_tag_is_computed_from_previews_every_stack(entry) -> None:
    inside = entry / "x.py" if (ROOT / entry).is_dir() else entry
    assert affected_stacks([inside.as_posix()], STACKS) == STACKS


def test_the_tool_runs_on_a_bare_python_without_site_packages() -> None:
    """The workflow's `stacks` job runs it right after setup-python, with nothing installed."""
    result = subprocess.run(
        [sys.executable, "-S", "-m", "tools.changed_stacks", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "path",
    ["README.md", "docs/ci.md", "tests/policy/test_pack.py", ".github/workflows/deploy.yml", "infrastructure.md"],
)
def test_docs_tests_and_workflows_preview_nothing(path: str) -> None:
    assert affected_stacks([path], STACKS) == []


def test_a_deleted_stack_is_not_previewed() -> None:
    assert affected_stacks(["Pulumi.old.yaml", "Pulumi.dev.yaml"], STACKS) == ["dev"]


@pytest.mark.parametrize("entry_point", ["__main__", "policy.__main__"])
def test_every_package_the_program_or_the_pack_imports_previews_every_stack(entry_point: str) -> None:
    """A change anywhere in the code `pulumi preview` runs (the program and the policy pack, through every import)
    can change every stack's preview."""
    for module in sorted(reachable(entry_point)):
        path = MODULES[module].relative_to(ROOT).as_posix()
        assert affected_stacks([path], STACKS) == STACKS, f"{path} ({entry_point} imports it) previews no stack"
