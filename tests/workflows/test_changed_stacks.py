"""Which stacks a pull request previews."""

from __future__ import annotations

import pytest

from infra import stack_files
from tools.changed_stacks import affected_stacks, stack_names

STACKS = ["dev", "p5-16", "p5-2"]


def test_the_tool_sees_the_same_stacks_as_the_project() -> None:
    assert stack_names() == stack_files.stack_names()


def test_a_changed_stack_file_previews_that_stack() -> None:
    assert affected_stacks(["Pulumi.p5-16.yaml"], STACKS) == ["p5-16"]


@pytest.mark.parametrize("path", ["__main__.py", "Pulumi.yaml", "requirements.txt", "infra/gpu_nodes.py",
                                  "workloads/job.py", "trainer/train.py", "docker/Dockerfile", "policy/efa.py"])
def test_a_change_to_what_every_stack_is_built_from_previews_every_stack(path: str) -> None:
    assert affected_stacks([path], STACKS) == STACKS


@pytest.mark.parametrize("path", ["README.md", "docs/ci.md", "tests/policy/test_pack.py",
                                  ".github/workflows/deploy.yml", "infrastructure.md"])
def test_docs_tests_and_workflows_preview_nothing(path: str) -> None:
    assert affected_stacks([path], STACKS) == []


def test_a_deleted_stack_is_not_previewed() -> None:
    assert affected_stacks(["Pulumi.old.yaml", "Pulumi.dev.yaml"], STACKS) == ["dev"]
