"""`.ci/run` and scripts/system-packages.sh: a fresh machine with only Python and make gets what `make test` needs,
Debian's prometheus installs without starting, and nothing is killed. Run for real, on a PATH of their own: the
commands they use from this machine, and recorders standing in for apt-get, sudo, id, make and the tools whose
presence they check."""

from __future__ import annotations

import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from stack.paths import PROJECT_ROOT

CI_SCRIPT = PROJECT_ROOT / ".ci" / "run"
SYSTEM_PACKAGES = PROJECT_ROOT / "scripts" / "system-packages.sh"
# What the scripts run from the system, linked into the test's PATH (bash and env for the shebang).
SYSTEM_COMMANDS = ("bash", "env", "dirname", "cp", "mv", "rm", "chmod", "sort", "tr", "cat")
TEST_TOOLS = ("prometheus", "promtool", "gpg", "gpgv")
# apt-get records its arguments and, for an install, asks the policy what a maintainer script would: may the
# prometheus service start? (invoke-rc.d and deb-systemd-invoke run `policy-rc.d UNIT ACTION`; 101 forbids it.)
FAKE_APT_GET = """#!/bin/sh
echo "apt-get $*" >> "$CI_LOG"
if [ "$1" = install ]; then
    "$POLICY_RC_D" prometheus.service start
    echo "policy-rc.d prometheus.service start: $?" >> "$CI_LOG"
fi
"""
RECORDER = '#!/bin/sh\necho "{name} $*" >> "$CI_LOG"\n'


def executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


class Machine:
    """A PATH with the system commands the scripts use and the fakes a test chooses."""

    def __init__(self, root: Path, uid: int = 0, apt: bool = True, sudo: bool = False, tools: tuple[str, ...] = ()):
        self.root, self.bin, self.log = root, root / "bin", root / "ci.log"
        self.bin.mkdir()
        for name in SYSTEM_COMMANDS:
            found = shutil.which(name)
            assert found, f"{name} is not on this machine's PATH"
            (self.bin / name).symlink_to(found)
        executable(self.bin / "id", f"#!/bin/sh\necho {uid}\n")
        if apt:
            executable(self.bin / "apt-get", FAKE_APT_GET)
        if sudo:
            executable(self.bin / "sudo", RECORDER.format(name="sudo"))
        for tool in tools:
            executable(self.bin / tool, RECORDER.format(name=tool))
        self.policy = root / "policy-rc.d"

    def run(self, argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
        environment = {"PATH": str(self.bin), "CI_LOG": str(self.log), "POLICY_RC_D": str(self.policy), **env}
        return subprocess.run(argv, env=environment, capture_output=True, text=True, timeout=60)

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


def test_nothing_is_installed_when_every_test_tool_is_there(tmp_path: Path) -> None:
    machine = Machine(tmp_path, tools=TEST_TOOLS)
    result = machine.run([str(SYSTEM_PACKAGES), "test"])
    assert result.returncode == 0, result.stderr
    assert machine.calls() == []


def test_missing_test_tools_are_installed_as_root_with_every_service_start_forbidden(tmp_path: Path) -> None:
    machine = Machine(tmp_path, tools=("gpg",))
    result = machine.run([str(SYSTEM_PACKAGES), "test"])
    assert result.returncode == 0, result.stderr
    calls = machine.calls()
    assert calls[0] == "apt-get update"
    # promtool comes with prometheus: one package for both; gpg is there.
    assert calls[1] == "apt-get install -y --no-install-recommends gpgv prometheus"
    assert calls[2] == "policy-rc.d prometheus.service start: 101"
    assert "apt-get install gpgv prometheus" in result.stderr  # it says what it runs
    assert not machine.policy.exists()


def test_an_existing_policy_is_put_back_unchanged(tmp_path: Path) -> None:
    machine = Machine(tmp_path)
    executable(machine.policy, "#!/bin/sh\nexit 0\n")
    before = machine.policy.read_bytes()
    assert machine.run([str(SYSTEM_PACKAGES), "test"]).returncode == 0
    assert machine.policy.read_bytes() == before
    assert not list(tmp_path.glob("policy-rc.d.*")), "the saved copy was left behind"


def test_a_user_goes_through_sudo_and_is_told_so(tmp_path: Path) -> None:
    machine = Machine(tmp_path, uid=1000, sudo=True)
    result = machine.run([str(SYSTEM_PACKAGES), "test"])
    assert result.returncode == 0, result.stderr
    (call,) = machine.calls()
    assert call.startswith("sudo ") and call.endswith(f"{SYSTEM_PACKAGES} test")
    assert "through sudo" in result.stderr and "gpg gpgv prometheus" in result.stderr


def test_a_user_without_sudo_is_told_the_command_to_run_as_root(tmp_path: Path) -> None:
    machine = Machine(tmp_path, uid=1000)
    result = machine.run([str(SYSTEM_PACKAGES), "test"])
    assert result.returncode == 1
    assert "apt-get install gpg gpgv prometheus" in result.stderr and machine.calls() == []


def test_without_apt_get_the_packages_are_named(tmp_path: Path) -> None:
    machine = Machine(tmp_path, apt=False, tools=("prometheus", "promtool"))
    result = machine.run([str(SYSTEM_PACKAGES), "test"])
    assert result.returncode == 1
    assert "gpg gpgv" in result.stderr and "package manager" in result.stderr


def test_pythons_venv_module_is_installed_where_debian_leaves_it_out(tmp_path: Path) -> None:
    machine = Machine(tmp_path)
    without_ensurepip = tmp_path / "python-without-ensurepip"
    executable(without_ensurepip, "#!/bin/sh\nexit 1\n")  # `import ensurepip` fails, as on a bare Debian python3
    result = machine.run([str(SYSTEM_PACKAGES), "venv"], PYTHON=str(without_ensurepip))
    assert result.returncode == 0, result.stderr
    assert "apt-get install -y --no-install-recommends python3-venv" in machine.calls()


def test_a_python_with_venv_needs_nothing(tmp_path: Path) -> None:
    machine = Machine(tmp_path)
    result = machine.run([str(SYSTEM_PACKAGES), "venv"], PYTHON=sys.executable)
    assert result.returncode == 0, result.stderr
    assert machine.calls() == []


def test_ci_installs_make_when_missing_then_runs_readmes_test_command(tmp_path: Path) -> None:
    machine = Machine(tmp_path)
    result = machine.run([str(CI_SCRIPT)])
    # No make on this PATH: apt-get installs it, and the `make test` after it is not found (exit 127).
    assert machine.calls()[:2] == ["apt-get update", "apt-get install -y --no-install-recommends make"]
    assert result.returncode == 127


def test_ci_with_make_runs_make_test_with_the_compile_test_on(tmp_path: Path) -> None:
    machine = Machine(tmp_path)
    executable(
        machine.bin / "make", '#!/bin/sh\necho "make $* TRAINER_TEST_COMPILE=$TRAINER_TEST_COMPILE" >> "$CI_LOG"\n'
    )
    result = machine.run([str(CI_SCRIPT)])
    assert result.returncode == 0, result.stderr
    assert machine.calls() == ["make test TRAINER_TEST_COMPILE=1"]


def test_make_test_and_the_venv_run_the_system_packages_step_first() -> None:
    makefile = (PROJECT_ROOT / "Makefile").read_text()
    test_recipe = makefile.split("\ntest: ", 1)[1].split("\n\n", 1)[0].splitlines()
    assert test_recipe[1].strip() == "scripts/system-packages.sh test"
    venv_recipe = makefile.split("\n$(STAMP): ", 1)[1].split("\n\n", 1)[0].splitlines()
    assert venv_recipe[1].strip() == "PYTHON=$(PYTHON) scripts/system-packages.sh venv"


SCRIPTS = [CI_SCRIPT, SYSTEM_PACKAGES, PROJECT_ROOT / "Makefile", *sorted((PROJECT_ROOT / "docker").glob("*.sh"))]


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda path: path.name)
def test_nothing_is_killed_by_name_or_pattern(path: Path) -> None:
    assert not re.search(r"\b(pkill|killall)\b", path.read_text()), f"{path.name} kills processes by pattern"
