"""The reviewer's summary of a stack run as a TrainJob: the memory figure is the pack's estimate of the TrainJob's
runtime, the object that holds its pods, and equals the PyTorchJob's for the same job (no elastic range)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from stack.files import stack_names
from tests.workloads.job.trainjob_stacks import trainjob_raw_config
from tools.pr_summary import summarize


@pytest.fixture(scope="module")
def trainjob_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every stack file, rewritten with job.api trainjob."""
    root = tmp_path_factory.mktemp("trainjob-stacks")
    for stack in stack_names():
        document = {"config": trainjob_raw_config(stack)}
        (root / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(document))
    return root


@pytest.mark.parametrize("stack", stack_names())
def test_a_trainjob_stack_is_sized_like_its_pytorchjob(stack: str, trainjob_root: Path) -> None:
    trainjob, pytorchjob = summarize(stack, trainjob_root), summarize(stack)
    assert trainjob.error is None
    assert trainjob.memory_per_gpu_gib is not None
    assert (trainjob.memory_per_gpu_gib, trainjob.fits) == (pytorchjob.memory_per_gpu_gib, pytorchjob.fits)
