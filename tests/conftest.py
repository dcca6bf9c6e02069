"""Shared fixtures: the project root on sys.path, and the Pulumi program run once per stack under mocks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from stack.files import stack_names  # noqa: E402
from tests.harness.pulumi_program import ProgramRun, run_program  # noqa: E402

STACKS = stack_names()


@pytest.fixture(scope="session", params=STACKS)
def stack_run(request: pytest.FixtureRequest) -> ProgramRun:
    """__main__.py run under mocks for each stack file; the run must succeed."""
    run = run_program(request.param)
    assert run.error is None, run.error
    return run
