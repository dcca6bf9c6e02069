"""The preview counts host memory: jobSizing shows what a background checkpoint save stages per node, and a job whose
staging does not fit in its worker pod is refused with the numbers and the smallest fixes.

These go through `stack.config.parse_stack_config`, as `pulumi preview` does.
"""

from __future__ import annotations

import re

import pytest
import yaml

from sizing.catalog import CATALOG
from sizing.fsx import checkpoint_bytes
from sizing.host_memory import pod_memory_bytes
from stack.fields import ConfigError
from stack.fit import fit_problems, sizing_summary
from stack.parse import parse_stack_config
from stack.paths import PROJECT_ROOT as ROOT
from tests.harness.text import must_search
from trainer.base.model.presets import PRESETS
from trainer.base.units import GIB
from workloads.job.spec import node_shape

LARGE_FSX = {"fsxCapacityGiB": 4800}  # room for the checkpoints: these tests are about host memory
# Llama 2 7B trained in full on one-GPU g6e.xlarge nodes (32 GiB of host memory): it fits the GPU from 3 nodes, and
# each node stages 1/nodes of its 81 GB checkpoint.
SMALL_HOST_JOB = {"model": "llama2-7b", "seqLen": 512, "activationCheckpointing": "full"}


def config_for(job: dict, gpu_nodes: dict):
    raw = {"aws:region": "us-east-1", "fsdp-eks:job": job, "fsdp-eks:gpuNodes": gpu_nodes}
    return parse_stack_config({**raw, "fsdp-eks:storage": LARGE_FSX}, "t")


def test_job_sizing_shows_the_host_memory_of_the_p5_16_stack() -> None:
    """Llama 2 7B under HSDP on 16 p5: each node stages a sixteenth of the checkpoint (before the split, all of it)."""
    config = parse_stack_config(yaml.safe_load((ROOT / "Pulumi.p5-16.yaml").read_text())["config"], "p5-16")
    host = sizing_summary(config)["hostMemory"]  # type: ignore[index]
    sixteenth = checkpoint_bytes(PRESETS["llama2-7b"]) / 16 / GIB  # 4.7 GiB, not 75.3
    assert host["checkpointStagingGiB"] == pytest.approx(sixteenth, abs=0.1)
    assert host["processesGiB"] == 48 and host["podMemoryGiB"] == 1843 and host["fits"]


def test_a_job_whose_staging_does_not_fit_the_pod_is_refused_with_the_numbers_and_a_fix() -> None:
    with pytest.raises(ConfigError) as error:
        config_for(SMALL_HOST_JOB, {"instanceType": "g6e.xlarge", "count": 3})
    [problem] = error.value.problems  # the GPU fits: host memory alone
    assert "stages 25.1 GiB per node in pinned host memory" in problem
    assert "needs 31.1 GiB, more than the 25.2 GiB its worker pod has" in problem
    assert "a 28 GiB limit on a 32 GiB node" in problem
    assert re.search(r"smallest changes that fit: gpuNodes\.count: 4 \(\d+\.\d GiB\); job\.lora\.rank: 16", problem)


def test_the_suggested_node_count_fits() -> None:
    with pytest.raises(ConfigError) as error:
        config_for(SMALL_HOST_JOB, {"instanceType": "g6e.xlarge", "count": 3})
    nodes = int(must_search(r"gpuNodes\.count: (\d+)", error.value.problems[0]).group(1))
    config = config_for(SMALL_HOST_JOB, {"instanceType": "g6e.xlarge", "count": nodes})
    assert fit_problems(config) == []
    assert sizing_summary(config)["hostMemory"]["fits"]  # type: ignore[index]


@pytest.mark.parametrize("instance", sorted(CATALOG))
def test_the_sizing_budgets_the_worker_pods_own_memory_limit(instance: str) -> None:
    assert pod_memory_bytes(CATALOG[instance]) == node_shape(CATALOG[instance], efa=False).memory_gib * GIB
