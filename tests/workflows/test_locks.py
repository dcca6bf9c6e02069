"""The lock files CI installs from (`pip install --require-hashes -r <lock>`): every package pinned with the hashes of
its files, each lock in step with the requirement files it is compiled from (`make lock`), and the test environment
running the same versions of the program's and the policy pack's packages that the workflows deploy with."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.workflows.workflows import ROOT

MAKEFILE = (ROOT / "Makefile").read_text()
# `$(PIP_COMPILE) $(PIP_COMPILE_ARGS) [--constraint <lock>] --output-file <lock> <input>...` in the `lock` target.
COMPILE = re.compile(
    r"^\t\$\(PIP_COMPILE\) \$\(PIP_COMPILE_ARGS\) (?:--constraint (\S+) )?--output-file (\S+) (.+)$", re.M
)
LOCKS: dict[str, list[str]] = {m.group(2): m.group(3).split() for m in COMPILE.finditer(MAKEFILE)}
CONSTRAINTS: dict[str, str | None] = {m.group(2): m.group(1) for m in COMPILE.finditer(MAKEFILE)}
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def lock_entries(lock: str) -> dict[str, tuple[Version, list[str]]]:
    """name -> (pinned version, its hashes), from pip-compile's `name==version \\` + `--hash=...` lines."""
    entries: dict[str, tuple[Version, list[str]]] = {}
    current = None
    for line in (ROOT / lock).read_text().splitlines():
        if pin := PIN.match(line):
            current = canonicalize_name(pin.group(1))
            entries[current] = (Version(pin.group(2).rstrip(" \\")), [])
        elif line.strip().startswith("--hash=") and current:
            entries[current][1].append(line.strip().rstrip(" \\"))
        elif line and not line.startswith(" ") and not line.startswith("#"):
            raise AssertionError(f"{lock}: a line that is not a pin: {line!r}")
    return entries


def requirements(path: Path) -> list[Requirement]:
    """The requirements of a requirements file, `-r` includes followed."""
    found = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-r "):
            found += requirements(path.parent / line[3:].strip())
        elif line:
            found.append(Requirement(line))
    return found


def test_the_makefile_compiles_the_three_locks() -> None:
    assert LOCKS == {
        "requirements.lock": ["requirements.txt"],
        "policy/requirements.lock": ["policy/requirements.txt"],
        "requirements-dev.lock": ["requirements-dev.txt", "requirements-torch-cpu.txt"],
    }


def test_the_deployed_locks_are_compiled_within_the_tested_one() -> None:
    assert CONSTRAINTS == {
        "requirements-dev.lock": None,
        "requirements.lock": "requirements-dev.lock",
        "policy/requirements.lock": "requirements-dev.lock",
    }
    assert next(iter(LOCKS)) == "requirements-dev.lock"  # compiled first: the others read it


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_every_package_is_pinned_with_sha256_hashes(lock: str) -> None:
    entries = lock_entries(lock)
    assert entries
    for name, (_, hashes) in entries.items():
        assert hashes and all(re.fullmatch(r"--hash=sha256:[0-9a-f]{64}", h) for h in hashes), name


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_the_lock_meets_every_requirement_of_its_files(lock: str) -> None:
    entries = lock_entries(lock)
    for source in LOCKS[lock]:
        for requirement in requirements(ROOT / source):
            name = canonicalize_name(requirement.name)
            assert name in entries, f"{lock} lacks {requirement} ({source}): make lock"
            assert requirement.specifier.contains(entries[name][0], prereleases=True), (
                f"{lock} pins {name}=={entries[name][0]}, {source} asks for {requirement}: make lock"
            )


@pytest.mark.parametrize("deployed", ["requirements.lock", "policy/requirements.lock"])
def test_the_tests_run_the_versions_ci_deploys_with(deployed: str) -> None:
    tested = lock_entries("requirements-dev.lock")
    for name, (version, _) in lock_entries(deployed).items():
        assert tested.get(name, (None,))[0] == version, f"{name}: {deployed} has {version}, the test venv another"


def test_the_test_environment_gets_torchs_cpu_build() -> None:
    entries = lock_entries("requirements-dev.lock")
    assert entries["torch"][0].local == "cpu"
    assert not [name for name in entries if name.startswith("nvidia-")]
