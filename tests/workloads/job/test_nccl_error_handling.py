"""NCCL's error handling in every worker pod: set explicitly, with names the pinned torch reads."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from workloads.job.api import job_api_for
from workloads.job.pod import NCCL_ERROR_HANDLING

from .job_stacks import STACKS, spec_of


@pytest.mark.parametrize("stack", STACKS)
def test_every_stacks_workers_set_nccls_error_handling_explicitly(stack: str) -> None:
    spec = spec_of(stack)
    (container,) = job_api_for(spec.api).worker_pod(spec)["spec"]["containers"]
    env = {entry["name"]: entry.get("value") for entry in container["env"]}
    assert {name: env.get(name) for name in NCCL_ERROR_HANDLING} == NCCL_ERROR_HANDLING


def test_the_names_are_the_ones_the_pinned_torch_reads() -> None:
    """Each name as declared in torch's ProcessGroupNCCL.hpp (the CPU wheel ships the header): a name torch does not
    read would be ignored without a word."""
    torch = importlib.util.find_spec("torch")  # found, not imported: nothing above the trainer loads torch
    assert torch is not None and torch.origin is not None
    header = Path(torch.origin).parent / "include/torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp"
    declared = set(re.findall(r'static std::vector<std::string> \w+ = \{\s*"(TORCH_NCCL_\w+)"', header.read_text()))
    assert set(NCCL_ERROR_HANDLING) <= declared
