"""Whether this machine can build the trainer image and push it to the stack's ECR registry.

Without `job.image`, `pulumi up` builds docker/Dockerfile for linux/amd64 with BuildKit and pushes it with this
machine's Docker login (workloads/job/image.py). pulumi-docker-build reads the Docker config when it starts: the
registry must be in its `auths` (from `docker login`) or its `credHelpers` (amazon-ecr-credential-helper); a global
`credsStore` is asked only for registries `auths` names (docs/aws.md, "The trainer image").
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from preflight.findings import Finding, ok, problem, warning
from stack.config import StackConfig
from stack.fields import NAMESPACE

CHECK = "image push"
AMD64 = ("x86_64", "amd64")  # the GPU nodes' architecture, and platform.machine()'s names for it
BUILDX_TIMEOUT_S = 30

Runner = Callable[[list[str]], int]  # runs a command, returns its exit code


def run_quietly(command: list[str]) -> int:
    try:
        return subprocess.run(command, capture_output=True, timeout=BUILDX_TIMEOUT_S, check=False).returncode
    except (OSError, subprocess.TimeoutExpired):
        return 1


def registry(account: str, region: str) -> str:
    """The account's ECR registry in the stack's region, where the stack's repository lives."""
    return f"{account}.dkr.ecr.{region}.amazonaws.com"


def docker_config_path(environ: Mapping[str, str] = os.environ) -> Path:
    """Docker's config file: $DOCKER_CONFIG/config.json, else ~/.docker/config.json."""
    directory = environ.get("DOCKER_CONFIG")
    return Path(directory) / "config.json" if directory else Path.home() / ".docker" / "config.json"


def logged_in(config_file: Path, host: str) -> bool:
    """Whether the Docker config has credentials for `host`: an `auths` entry or a `credHelpers` one."""
    try:
        document = json.loads(config_file.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return host in (document.get("auths") or {}) or host in (document.get("credHelpers") or {})


def image_findings(
    config: StackConfig,
    account: str | None,
    config_file: Path,
    machine: str,
    which: Callable[[str], str | None],
    run: Runner = run_quietly,
) -> list[Finding]:
    """Docker with buildx, logged in to the stack's registry (`account` None: unknown, no AWS credentials), and a
    warning for a machine that builds amd64 by emulation."""
    if config.job.image is not None:
        return [ok(CHECK, f"{NAMESPACE}:job.image is set: nothing to build or push")]
    use_image = f"or build the image elsewhere and set {NAMESPACE}:job.image"
    if which("docker") is None:
        return [
            problem(CHECK, "no docker on the PATH: pulumi up builds the trainer image", f"install Docker, {use_image}")
        ]
    findings = []
    if run(["docker", "buildx", "version"]) != 0:
        findings.append(problem(CHECK, "docker buildx does not run", f"install the buildx plugin, {use_image}"))
    if account is not None:
        host = registry(account, config.region)
        if logged_in(config_file, host):
            findings.append(ok(CHECK, f"Docker has credentials for {host} (a docker login lasts 12 hours)"))
        else:
            findings.append(
                problem(
                    CHECK,
                    f"Docker has no credentials for {host} in {config_file}",
                    f"aws ecr get-login-password --region {config.region} | docker login --username AWS "
                    f"--password-stdin {host}",
                )
            )
    if machine.lower() not in AMD64:
        findings.append(
            warning(
                CHECK,
                f"this machine is {machine}: the linux/amd64 image (multi-GB CUDA base) builds under emulation, slowly",
                f"build on an x86_64 machine (or in CI), {use_image}",
            )
        )
    return findings
