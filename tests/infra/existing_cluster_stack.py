"""The test stack on an existing cluster (tests/infra/stacks/Pulumi.existing-cluster.yaml), run under the mocks as
the shipped stacks are: no shipped stack uses cluster.existing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.harness.pulumi_program import ProgramRun, run_program

EXISTING_CLUSTER_STACK = "existing-cluster"
STACK_FILE = Path(__file__).parent / "stacks" / f"Pulumi.{EXISTING_CLUSTER_STACK}.yaml"


def existing_cluster_config() -> dict[str, Any]:
    """The stack file's config, key by key, as run_program takes a stack that has no file in the project root."""
    return yaml.safe_load(STACK_FILE.read_text())["config"]


def run_existing_cluster(preview: str = "update") -> ProgramRun:
    run = run_program(EXISTING_CLUSTER_STACK, existing_cluster_config(), preview=preview)
    assert run.error is None, run.error
    return run
