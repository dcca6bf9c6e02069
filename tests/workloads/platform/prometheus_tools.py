"""Debian's prometheus package (prometheus and promtool) for the dashboard tests: the tool's path, or a failed test
that says how to install it. Never a skip: a dashboard check that silently does not run proves nothing, and CI
installs the package (.ci/run)."""

from __future__ import annotations

import shutil

import pytest

INSTALL = "install Debian's prometheus package, which brings promtool too: sudo apt-get install prometheus (README)"


def require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} is not installed; {INSTALL}", pytrace=False)
    return path
