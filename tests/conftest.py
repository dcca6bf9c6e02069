"""Shared fixtures: the project root on sys.path, and the Pulumi program run once per stack under mocks.

Tiers (markers in pyproject.toml): `make test-fast` runs neither `slow` tests (several processes, end to end) nor
`program` ones (__main__.py under the mocks); `make test` runs every test. A test that starts a program run without
the `program` mark gets a warning naming it: it belongs to the tier that runs the program."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The project root (the parent of tests/), found from this file: nothing of the project can be imported before it is
# on the path.
if str(Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stack.files import stack_names
from tests.harness.pulumi_program import SERVER, ProgramRun, run_program

STACKS = stack_names()


@pytest.fixture(scope="session", params=STACKS)
def stack_run(request: pytest.FixtureRequest) -> ProgramRun:
    """__main__.py run under mocks for each stack file; the run must succeed."""
    run = run_program(request.param)
    assert run.error is None, run.error
    return run


@pytest.fixture(autouse=True)
def the_environment_stays_one_object() -> Iterator[None]:
    """A test must not leave os.environ a new object: what holds the old one (a botocore session's config store)
    then misses every later monkeypatch.setenv. datasets' Dataset.map with num_proc does it
    (arrow_dataset.py: `os.environ = prev_env`, a deep copy)."""
    environ = os.environ
    yield
    assert os.environ is environ, "this test replaced os.environ; restore it (monkeypatch.setattr(os, 'environ', ...))"


@pytest.fixture(scope="session", autouse=True)
def kubernetes_schemas_read_once() -> Iterator[None]:
    """kubernetes_validate.validate reads and parses the kind's schema and the version's _definitions.json (several
    MB) on every call, most of a strict schema check's time. The files do not change during the session and the
    validator only reads what they parse to, so each is parsed once."""
    from kubernetes_validate import utils

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(utils, "schema_contents", functools.cache(utils.schema_contents))
        yield


@pytest.hookimpl(hookwrapper=True, trylast=True)  # inside the warnings plugin's wrapper, which records the warning
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    runs = SERVER.runs
    yield
    if SERVER.runs > runs and item.get_closest_marker("program") is None:
        item.warn(pytest.PytestWarning("runs __main__.py under the mocks without @pytest.mark.program"))
