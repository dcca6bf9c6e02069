"""The type checker: `make lint` and `make test` run it over the whole tree, at a level that checks every function
body (so every Pulumi resource's arguments against the SDK's typed Args and ArgsDict), with nothing of Pulumi
ignored, from the version the test environment's lock pins."""

from __future__ import annotations

import re
import tomllib

from tests.workflows.test_locks import MAKEFILE, lock_entries
from tests.workflows.workflows import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CHECKER = PYPROJECT["tool"]["basedpyright"]


def recipe(target: str) -> list[str]:
    """The command lines of a Makefile target (the tab-indented lines under `target:`)."""
    match = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", MAKEFILE, re.M)
    assert match, f"the Makefile has no {target} target"
    return [line.strip() for line in match.group(1).splitlines()]


def test_make_lint_and_make_test_run_the_type_checker() -> None:
    assert re.search(r"^TYPE_CHECK := \$\(VENV\)/bin/basedpyright --pythonpath \$\(PY\)$", MAKEFILE, re.M)
    assert "$(TYPE_CHECK)" in recipe("lint")
    assert "$(TYPE_CHECK)" in recipe("test")


def test_the_checker_reads_every_function_body() -> None:
    """basic skips the argument checks of unannotated calls that standard and stricter modes make."""
    assert CHECKER["typeCheckingMode"] in {"standard", "strict", "recommended", "all"}
    assert CHECKER.get("reportArgumentType", True) and CHECKER.get("reportCallIssue", True)


def test_nothing_of_pulumi_is_left_out() -> None:
    left_out = [*CHECKER.get("exclude", []), *CHECKER.get("ignore", [])]
    assert not [path for path in left_out if "pulumi" in path.lower()]
    assert set(CHECKER.get("exclude", [])) <= {"**/.*", "**/__pycache__", "policy/venv", "runs"}


def test_the_checker_is_pinned_in_the_test_environment() -> None:
    pinned = dict(re.findall(r"^(basedpyright)==(\S+)", (ROOT / "requirements-dev.txt").read_text(), re.M))
    assert str(lock_entries("requirements-dev.lock")["basedpyright"][0]) == pinned["basedpyright"]
