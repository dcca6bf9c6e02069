"""The trainer image's recipe: pinned versions from stack/versions.py only, the trainer's dependencies only, a
non-root user, and a content tag that changes exactly when the image would."""

from __future__ import annotations

import re
import shutil
from importlib.metadata import version as installed_version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from stack.paths import PROJECT_ROOT
from stack.versions import TRAINER_BASE_IMAGE
from tests.harness.text import must_search
from workloads.job.image_source import IMAGE_INPUTS, build_args, content_tag, image_files

DOCKERFILE = (PROJECT_ROOT / "docker" / "Dockerfile").read_text()
DOCKERIGNORE = (PROJECT_ROOT / "docker" / "Dockerfile.dockerignore").read_text()
REQUIREMENTS = [
    Requirement(line)
    for line in (PROJECT_ROOT / "requirements-trainer.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]


@pytest.fixture
def source_copy(tmp_path: Path) -> Path:
    for entry in IMAGE_INPUTS:
        source, target = PROJECT_ROOT / entry, tmp_path / entry
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, target)
    return tmp_path


def test_the_content_tag_is_stable(source_copy: Path) -> None:
    assert content_tag(source_copy) == content_tag(source_copy)


def test_the_content_tag_changes_with_the_trainer_source(source_copy: Path) -> None:
    before = content_tag(source_copy)
    (source_copy / "trainer" / "__init__.py").write_text("# changed\n", encoding="utf-8")
    assert content_tag(source_copy) != before


def test_the_content_tag_ignores_files_outside_the_image(source_copy: Path) -> None:
    before = content_tag(source_copy)
    (source_copy / "README.md").write_text("not in the image\n")
    (source_copy / "trainer" / "__pycache__").mkdir(exist_ok=True)
    (source_copy / "trainer" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert content_tag(source_copy) == before


def test_the_dockerignore_lets_in_exactly_the_tagged_inputs() -> None:
    allowed = {line[1:] for line in DOCKERIGNORE.splitlines() if line.startswith("!")}
    copied = {Path(entry) for entry in IMAGE_INPUTS} - {Path("docker/Dockerfile")}
    assert {Path(a) for a in allowed} == copied
    assert any(line.strip() == "*" for line in DOCKERIGNORE.splitlines())
    assert {path.parts[0] for path in image_files()} == {"requirements-trainer.lock", "trainer", "docker"}


def test_versions_come_only_from_build_args() -> None:
    declared = set(re.findall(r"^ARG (\w+)$", DOCKERFILE, flags=re.MULTILINE))
    assert declared == set(build_args())
    for version in build_args().values():
        assert version not in DOCKERFILE


def test_the_image_runs_as_a_non_root_user() -> None:
    (user,) = re.findall(r"^USER (\S+)$", DOCKERFILE, flags=re.MULTILINE)
    assert user not in {"root", "0"}


def test_the_image_installs_only_the_trainers_locked_requirements() -> None:
    """One install, from the lock in hash-checking mode (its contents: tests/workflows/test_locks.py)."""
    installs = re.findall(r"pip install[^\n]*", DOCKERFILE)
    assert installs == ["pip install --no-cache-dir --require-hashes -r /tmp/requirements-trainer.lock \\"]
    assert re.search(r"^COPY requirements-trainer\.lock /tmp/$", DOCKERFILE, re.MULTILINE)
    names = {r.name.lower() for r in REQUIREMENTS}
    assert not {n for n in names if n.startswith("pulumi") or n.startswith("kube")}


def test_the_content_tag_changes_with_the_dependency_lock(source_copy: Path) -> None:
    before = content_tag(source_copy)
    lock = source_copy / "requirements-trainer.lock"
    lock.write_text(lock.read_text().replace("transformers==", "transformers==9", 1))
    assert content_tag(source_copy) != before


def test_the_base_images_torch_satisfies_the_requirement() -> None:
    torch_version = must_search(r"pytorch:(\d+\.\d+\.\d+)-", TRAINER_BASE_IMAGE).group(1)
    (torch,) = [r for r in REQUIREMENTS if r.name == "torch"]
    assert Version(torch_version) in torch.specifier


def test_the_tests_run_the_torch_the_image_runs() -> None:
    """One torch everywhere: the base image's, the test virtualenv's pin (requirements-torch-cpu.txt, which the
    Makefile compiles into the locked test environment), and the one installed."""
    image_torch = must_search(r"pytorch:(\d+\.\d+\.\d+)-", TRAINER_BASE_IMAGE).group(1)
    pinned = (PROJECT_ROOT / "requirements-torch-cpu.txt").read_text()
    pinned_torch = must_search(r"^torch==(\d+\.\d+\.\d+)", pinned, re.MULTILINE).group(1)
    installed_torch = Version(installed_version("torch")).base_version  # "2.13.0+cpu" is the CPU build of 2.13.0
    assert image_torch == pinned_torch == installed_torch


def test_the_image_has_torchao_for_fp8_built_for_its_torch() -> None:
    """torchao publishes no torch requirement; 0.17 and later are built against torch's stable ABI from 2.11 on."""
    lines = (PROJECT_ROOT / "requirements-trainer-gpu.txt").read_text().splitlines()
    (torchao,) = [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]
    assert torchao.name == "torchao" and str(torchao.specifier) == "==0.17.0"
    torch_version = must_search(r"pytorch:(\d+\.\d+\.\d+)-", TRAINER_BASE_IMAGE).group(1)
    assert Version(torch_version) >= Version("2.11.0")


def test_the_image_takes_no_transformers_that_brings_kernels() -> None:
    """transformers 5.25 requires kernels (>=0.19.1,<0.20); with it installed, transformers' Llama attention runs
    through kernels' forward wrapper (use_kernelized_func), which sets a ContextVar on every call: torch.compile of a
    checkpointed layer refuses that side effect, so --compile with any activation checkpointing fails."""
    (transformers,) = [requirement for requirement in REQUIREMENTS if requirement.name == "transformers"]
    assert "5.24.0" in transformers.specifier and "5.25.0" not in transformers.specifier
    assert "5.17.0" in transformers.specifier  # the lent GPU machine's (tests/harness/floor.py)
