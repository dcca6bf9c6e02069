"""`.ci/run` installs Debian's prometheus without starting it, and kills nothing: run for real with apt-get and make
replaced by recorders, and a policy-rc.d of its own (POLICY_RC_D) instead of the system's."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

from stack.paths import PROJECT_ROOT

CI_SCRIPT = PROJECT_ROOT / ".ci" / "run"
# apt-get records its arguments and, for an install, asks the policy what a maintainer script would: may the
# prometheus service start? (invoke-rc.d and deb-systemd-invoke run `policy-rc.d UNIT ACTION`; 101 forbids it.)
FAKE_APT_GET = """#!/bin/sh
echo "apt-get $*" >> "$CI_LOG"
if [ "$1" = install ]; then
    "$POLICY_RC_D" prometheus.service start
    echo "policy-rc.d prometheus.service start: $?" >> "$CI_LOG"
fi
"""
FAKE_MAKE = """#!/bin/sh
echo "make $*" >> "$CI_LOG"
"""


def executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def run_ci(tmp_path: Path) -> list[str]:
    tools = tmp_path / "bin"
    tools.mkdir()
    executable(tools / "apt-get", FAKE_APT_GET)
    executable(tools / "make", FAKE_MAKE)
    log = tmp_path / "ci.log"
    env = {
        **os.environ,
        "PATH": f"{tools}:{os.environ['PATH']}",
        "CI_LOG": str(log),
        "POLICY_RC_D": str(tmp_path / "policy-rc.d"),
    }
    result = subprocess.run([str(CI_SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return log.read_text().splitlines()


def test_prometheus_is_installed_with_every_service_start_forbidden(tmp_path: Path) -> None:
    log = run_ci(tmp_path)
    install = next(i for i, line in enumerate(log) if line.startswith("apt-get install"))
    assert "prometheus" in log[install].split()
    assert log[install + 1] == "policy-rc.d prometheus.service start: 101"
    assert log[-1] == "make test"


def test_without_a_policy_before_none_is_left_behind(tmp_path: Path) -> None:
    run_ci(tmp_path)
    assert not (tmp_path / "policy-rc.d").exists()


def test_an_existing_policy_is_put_back_unchanged(tmp_path: Path) -> None:
    policy = tmp_path / "policy-rc.d"
    executable(policy, "#!/bin/sh\nexit 0\n")
    before = policy.read_bytes()
    run_ci(tmp_path)
    assert policy.read_bytes() == before
    assert not list(tmp_path.glob("policy-rc.d.*")), "the saved copy was left behind"


SCRIPTS = [CI_SCRIPT, PROJECT_ROOT / "Makefile", *sorted((PROJECT_ROOT / "docker").glob("*.sh"))]


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda path: path.name)
def test_nothing_is_killed_by_name_or_pattern(path: Path) -> None:
    assert not re.search(r"\b(pkill|killall)\b", path.read_text()), f"{path.name} kills processes by pattern"
