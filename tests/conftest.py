"""Shared fixtures: the project root on sys.path, and the Pulumi program run once per stack under mocks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The project root (the parent of tests/), found from this file: nothing of the project can be imported before it is
# on the path.
if str(Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stack.files import stack_names
from tests.harness.pulumi_program import ProgramRun, run_program

STACKS = stack_names()


@pytest.fixture(scope="session", params=STACKS)
def stack_run(request: pytest.FixtureRequest) -> ProgramRun:
    """__main__.py run under mocks for each stack file; the run must succeed."""
    run = run_program(request.param)
    assert run.error is None, run.error
    return run
