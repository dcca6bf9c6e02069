"""Whether this machine can build the trainer image and push it: Docker with buildx, and credentials for the stack's
registry in the Docker config pulumi-docker-build reads (an `auths` or a `credHelpers` entry)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from preflight.image import docker_config_path, image_findings, registry
from stack.config import StackConfig
from stack.files import load_stack_config

ACCOUNT = "123456789012"
HOST = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
P5_2 = load_stack_config("p5-2")


def on_path(name: str) -> str | None:
    return f"/usr/bin/{name}"


def write(config_file: Path, document: dict[str, object]) -> Path:
    config_file.write_text(json.dumps(document))
    return config_file


def findings(config_file: Path, config: StackConfig = P5_2, machine: str = "x86_64", buildx: int = 0) -> list:
    return image_findings(config, ACCOUNT, config_file, machine, on_path, lambda command: buildx)


def test_the_registry_is_the_accounts_in_the_stacks_region() -> None:
    assert registry(ACCOUNT, "us-east-1") == HOST


def test_a_docker_login_to_the_registry_passes(tmp_path: Path) -> None:
    config_file = write(tmp_path / "config.json", {"auths": {HOST: {"auth": "QVdTOnRva2Vu"}}})
    assert [f.level for f in findings(config_file)] == ["ok"]


def test_the_ecr_credential_helper_for_the_registry_passes(tmp_path: Path) -> None:
    config_file = write(tmp_path / "config.json", {"credHelpers": {HOST: "ecr-login"}})
    assert [f.level for f in findings(config_file)] == ["ok"]


def test_no_login_for_the_registry_is_a_problem_with_the_login_command(tmp_path: Path) -> None:
    other = "123456789012.dkr.ecr.eu-west-1.amazonaws.com"  # another region's registry is another registry
    config_file = write(tmp_path / "config.json", {"auths": {other: {}}, "credsStore": "desktop"})
    (finding,) = findings(config_file)
    assert finding.level == "problem" and HOST in finding.what
    assert finding.fix == (
        f"aws ecr get-login-password --region us-east-1 | docker login --username AWS --password-stdin {HOST}"
    )


def test_no_docker_config_at_all_is_no_login(tmp_path: Path) -> None:
    (finding,) = findings(tmp_path / "missing.json")
    assert finding.level == "problem"


def test_docker_missing_is_a_problem_pointing_at_job_image(tmp_path: Path) -> None:
    (finding,) = image_findings(P5_2, ACCOUNT, tmp_path / "c.json", "x86_64", lambda name: None, lambda c: 0)
    assert finding.level == "problem" and "fsdp-eks:job.image" in finding.fix


def test_buildx_that_does_not_run_is_a_problem(tmp_path: Path) -> None:
    config_file = write(tmp_path / "config.json", {"credHelpers": {HOST: "ecr-login"}})
    assert [f.level for f in findings(config_file, buildx=1)] == ["problem", "ok"]


def test_an_arm_machine_is_warned_that_the_amd64_build_is_emulated(tmp_path: Path) -> None:
    config_file = write(tmp_path / "config.json", {"credHelpers": {HOST: "ecr-login"}})
    levels = [f.level for f in findings(config_file, machine="arm64")]
    assert levels == ["ok", "warning"]


def test_a_stack_with_its_own_image_builds_nothing(tmp_path: Path) -> None:
    config = replace(P5_2, job=replace(P5_2.job, image="registry.example/trainer:1"))
    (finding,) = image_findings(config, ACCOUNT, tmp_path / "none.json", "arm64", lambda name: None, lambda c: 1)
    assert finding.level == "ok"


def test_the_docker_config_is_dockers(tmp_path: Path) -> None:
    assert docker_config_path({"DOCKER_CONFIG": str(tmp_path)}) == tmp_path / "config.json"
    assert docker_config_path({}) == Path.home() / ".docker" / "config.json"
