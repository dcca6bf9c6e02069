"""Shared fixtures: the project root on sys.path, and the Pulumi program run once per stack under mocks.

Tiers (markers in pyproject.toml): `make test-fast` runs neither `slow` tests (several processes, end to end) nor
`program` ones (__main__.py under the mocks); `make test` runs every test. A test that starts a program run without
the `program` mark gets a warning naming it: it belongs to the tier that runs the program.

`make test` runs on two pytest-xdist workers (`--dist loadgroup --no-loadscope-reorder`): the slow tests first, as one
group on one worker, one after another (each holds several processes; two at once would each take longer), while the
other worker takes the other tests a file at a time, so that a module's fixtures are made once."""

from __future__ import annotations

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


SLOW_GROUP = "slow"


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook, which reads the groups into the test ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first, in one group; every other test in its file's group (used by --dist loadgroup)."""
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    rest = [item for item in items if item.get_closest_marker("slow") is None]
    for item in slow:
        item.add_marker(pytest.mark.xdist_group(SLOW_GROUP))
    for item in rest:
        item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
    items[:] = slow + rest


@pytest.hookimpl(hookwrapper=True, trylast=True)  # inside the warnings plugin's wrapper, which records the warning
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    runs = SERVER.runs
    yield
    if SERVER.runs > runs and item.get_closest_marker("program") is None:
        item.warn(pytest.PytestWarning("runs __main__.py under the mocks without @pytest.mark.program"))
