"""The lock files CI and the trainer image install from (`pip install --require-hashes -r <lock>`): every package
pinned with the hashes of its files, each lock in step with the requirement files it is compiled from (`make lock`),
the test environment running the same versions of the program's, the policy pack's and the image's packages that the
workflows and the image deploy with, and the image's lock leaving torch to its base image."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.workflows.workflows import ROOT

MAKEFILE = (ROOT / "Makefile").read_text()
# `[grep -v -E '<filter>' <file> | ]$(PIP_COMPILE) $(PIP_COMPILE_ARGS) [--constraint <lock>] --output-file <lock>
# <input>...` in the `lock` target (the image's lock with $(IMAGE_LOCK_ARGS)); an input `-` is standard input,
# the filtered file.
COMPILE = re.compile(
    r"^\t(?:grep -v -E '(?P<filter>[^']+)' (?P<filtered>\S+) \| )?\$\(PIP_COMPILE\) "
    r"\$\((?P<args>PIP_COMPILE_ARGS|IMAGE_LOCK_ARGS)\) "
    r"(?:--constraint (?P<constraint>\S+) )?--output-file (?P<lock>\S+) (?P<inputs>.+)$",
    re.M,
)
MAKE_VARIABLES = dict(re.findall(r"^([A-Z_]+) := (.*)$", MAKEFILE, re.M))
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
IMAGE_LOCK = "requirements-trainer.lock"


def _expand(make_text: str) -> str:
    """A `$(VARIABLE)` of the Makefile replaced by its value, `$$` by `$` (what the shell gets)."""
    return re.sub(r"\$\((\w+)\)", lambda m: MAKE_VARIABLES[m.group(1)], make_text).replace("$$", "$")


def _inputs(match: re.Match[str]) -> list[str]:
    return [match["filtered"] if name == "-" else name for name in match["inputs"].split()]


LOCKS: dict[str, list[str]] = {m["lock"]: _inputs(m) for m in COMPILE.finditer(MAKEFILE)}
CONSTRAINTS: dict[str, str | None] = {m["lock"]: m["constraint"] for m in COMPILE.finditer(MAKEFILE)}
# Lines of an input that its grep filter drops: requirements the lock leaves to someone else (the base image).
FILTERS: dict[str, re.Pattern[str]] = {
    m["lock"]: re.compile(_expand(m["filter"])) for m in COMPILE.finditer(MAKEFILE) if m["filter"]
}


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


def requirements(path: Path, dropped: re.Pattern[str] | None = None) -> list[Requirement]:
    """The requirements of a requirements file, `-r` includes followed, without the lines `dropped` matches."""
    found = []
    for raw in path.read_text().splitlines():
        if dropped and dropped.search(raw):
            continue
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-r "):
            found += requirements(path.parent / line[3:].strip())
        elif line:
            found.append(Requirement(line))
    return found


def test_the_makefile_compiles_the_four_locks() -> None:
    assert LOCKS == {
        "requirements.lock": ["requirements.txt"],
        "policy/requirements.lock": ["policy/requirements.txt"],
        "requirements-dev.lock": ["requirements-dev.txt", "requirements-torch-cpu.txt"],
        IMAGE_LOCK: ["requirements-trainer.txt", "requirements-trainer-gpu.txt"],
    }


def test_the_deployed_locks_are_compiled_within_the_tested_one() -> None:
    assert CONSTRAINTS == {
        "requirements-dev.lock": None,
        "requirements.lock": "requirements-dev.lock",
        "policy/requirements.lock": "requirements-dev.lock",
        IMAGE_LOCK: "requirements-dev.lock",
    }
    assert next(iter(LOCKS)) == "requirements-dev.lock"  # compiled first: the others read it


def test_the_image_lock_leaves_exactly_torch_to_the_base_image() -> None:
    """The Makefile's filter drops the torch requirement and nothing else; the lock then holds neither torch nor the
    CUDA libraries and Triton that a torch from PyPI would pull in over the base image's own."""
    assert set(FILTERS) == {IMAGE_LOCK}
    trainer = (ROOT / "requirements-trainer.txt").read_text().splitlines()
    dropped = [line for line in trainer if FILTERS[IMAGE_LOCK].search(line)]
    assert [Requirement(line).name for line in dropped] == ["torch"]
    assert not FILTERS[IMAGE_LOCK].search("torchao==0.17.0")  # a name that only starts with torch stays
    # peft, accelerate and s3torchconnector require torch: the image lock's compile names it its one unsafe package,
    # which pip-compile leaves out of the lock (and pip finds installed in the base image).
    (args,) = [m["args"] for m in COMPILE.finditer(MAKEFILE) if m["lock"] == IMAGE_LOCK]
    assert args == "IMAGE_LOCK_ARGS"
    image_args = _expand(f"$({args})").split()
    assert "--unsafe-package" in image_args and image_args[image_args.index("--unsafe-package") + 1] == "torch"
    assert "--allow-unsafe" not in image_args and "--no-allow-unsafe" in image_args
    assert re.search(r"^# torch$", (ROOT / IMAGE_LOCK).read_text(), re.M)  # pip-compile's note of what it left out
    names = set(lock_entries(IMAGE_LOCK))
    assert "torch" not in names and "triton" not in names
    assert not [name for name in names if name.startswith("nvidia-")]
    assert {"torchao", "transformers", "boto3"} <= names


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
        for requirement in requirements(ROOT / source, FILTERS.get(lock)):
            name = canonicalize_name(requirement.name)
            assert name in entries, f"{lock} lacks {requirement} ({source}): make lock"
            assert requirement.specifier.contains(entries[name][0], prereleases=True), (
                f"{lock} pins {name}=={entries[name][0]}, {source} asks for {requirement}: make lock"
            )


@pytest.mark.parametrize("deployed", ["requirements.lock", "policy/requirements.lock", IMAGE_LOCK])
def test_the_tests_run_the_versions_ci_deploys_with(deployed: str) -> None:
    tested = lock_entries("requirements-dev.lock")
    # Only the GPU image's own additions (requirements-trainer-gpu.txt: torchao, which needs a GPU) are untested.
    gpu_only = {canonicalize_name(r.name) for r in requirements(ROOT / "requirements-trainer-gpu.txt")}
    for name, (version, _) in lock_entries(deployed).items():
        if deployed == IMAGE_LOCK and name in gpu_only:
            assert name not in tested, f"{name} is tested after all: drop it from the exceptions"
            continue
        assert tested.get(name, (None,))[0] == version, f"{name}: {deployed} has {version}, the test venv another"


def test_the_test_environment_gets_torchs_cpu_build() -> None:
    entries = lock_entries("requirements-dev.lock")
    assert entries["torch"][0].local == "cpu"
    assert not [name for name in entries if name.startswith("nvidia-")]
