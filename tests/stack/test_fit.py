"""Config validation by memory: a job that cannot fit fails with what it needs, what the GPU has, and what would fit.

These go through `stack.config.parse_stack_config`, as `pulumi preview` does.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from stack.fields import ConfigError
from stack.fit import fit_problems, sizing_summary, stack_sizing
from stack.parse import parse_stack_config
from stack.paths import PROJECT_ROOT as ROOT
from tests.harness.text import must_search

STACK_FILES = sorted(p for p in ROOT.glob("Pulumi.*.yaml"))


# Room for a 70B model's checkpoints (tests/sizing/test_sizing_fsx.py): these tests are about GPU memory.
LARGE_FSX = {"fsxCapacityGiB": 4800}


def config_for(job: dict, gpu_nodes: dict, storage: dict | None = None):
    raw = {"aws:region": "us-east-1", "fsdp-eks:job": job, "fsdp-eks:gpuNodes": gpu_nodes}
    return parse_stack_config({**raw, "fsdp-eks:storage": storage or LARGE_FSX}, "t")


def problems_for(job: dict, gpu_nodes: dict, storage: dict | None = None) -> list[str]:
    with pytest.raises(ConfigError) as error:
        config_for(job, gpu_nodes, storage)
    return error.value.problems


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: p.name)
def test_every_stack_files_job_fits(path: Path) -> None:
    config = parse_stack_config(yaml.safe_load(path.read_text())["config"], path.stem.split(".", 1)[1])
    sizing = stack_sizing(config)
    assert sizing is not None and sizing.fits, sizing and sizing.to_dict()


def test_llama_70b_on_one_p5_fails_with_the_memory_it_needs_and_what_fits() -> None:
    [problem] = problems_for({"model": "meta-llama/Llama-2-70b-hf"}, {"instanceType": "p5.48xlarge", "count": 1})
    assert re.search(r"needs \d+\.\d GiB per GPU", problem)
    assert "more than the 80 GiB of its H100-SXM" in problem
    assert "job.activationCheckpointing: full" in problem and "gpuNodes.count:" in problem


def test_a_single_change_that_fits_is_named() -> None:
    [problem] = problems_for(
        {"model": "llama2-13b", "shardingStrategy": "NO_SHARD"}, {"instanceType": "p4de.24xlarge", "count": 2}
    )
    assert "smallest changes that fit: job.shardingStrategy: FULL_SHARD" in problem


def test_the_suggested_changes_do_fit() -> None:
    job, gpu_nodes = {"model": "llama2-70b"}, {"instanceType": "p5.48xlarge", "count": 2}
    [problem] = problems_for({**job, "activationCheckpointing": "full"}, gpu_nodes)
    nodes = int(must_search(r"gpuNodes\.count: (\d+)", problem).group(1))
    config = config_for({**job, "activationCheckpointing": "full"}, {**gpu_nodes, "count": nodes})
    assert fit_problems(config) == []


def test_models_known_only_by_their_config_json_are_not_sized() -> None:
    config = config_for({"model": "/models/my-llama"}, {"instanceType": "g6e.xlarge", "count": 1})
    assert stack_sizing(config) is None and sizing_summary(config) is None


def test_the_summary_for_stack_outputs() -> None:
    config = config_for({"model": "llama2-7b"}, {"instanceType": "p5.48xlarge", "count": 2})
    summary = sizing_summary(config)
    assert summary is not None
    assert summary["fits"] and summary["gpuMemoryGiB"] == 80
    assert 0 < summary["peakAllocatedGiB"] < summary["neededGiB"] < 80


def test_an_elastic_job_must_fit_on_its_fewest_nodes() -> None:
    job = {"model": "llama2-70b", "activationCheckpointing": "full", "minNodes": 2, "globalBatchSize": 96}
    assert fit_problems(config_for({**job, "minNodes": 3}, {"instanceType": "p5.48xlarge", "count": 4})) == []
    [problem] = problems_for(job, {"instanceType": "p5.48xlarge", "count": 4})
    assert "on 2 x p5.48xlarge (job.minNodes: the fewest it runs on)" in problem
    assert "smallest changes that fit: job.lora.rank: 16 (" in problem and "; job.minNodes: 3 (" in problem


LLAMA31_70B = {"model": "meta-llama/Llama-3.1-70B", "seqLen": 4096, "batchSize": 1}
ONE_P5 = {"instanceType": "p5.48xlarge", "count": 1}


def test_where_lora_fits_and_full_fine_tuning_does_not_the_fix_names_lora() -> None:
    [problem] = problems_for({**LLAMA31_70B, "activationCheckpointing": "full"}, ONE_P5)
    assert "smallest changes that fit: job.lora.rank: 16 (" in problem
    assert (
        fit_problems(config_for({**LLAMA31_70B, "activationCheckpointing": "full", "lora": {"rank": 16}}, ONE_P5)) == []
    )


def test_where_no_single_change_fits_lora_is_named_beside_more_nodes() -> None:
    [problem] = problems_for(LLAMA31_70B, ONE_P5)
    lora, full = must_search(r"these together do: (.*); or, still training every weight, (.*)$", problem).groups()
    assert lora.startswith("job.activationCheckpointing: full, job.lora.rank: 16 (")
    assert full.startswith("job.activationCheckpointing: full, gpuNodes.count: 3 (")


def test_a_lora_job_is_sized_as_lora_and_not_offered_lora_again() -> None:
    [problem] = problems_for({**LLAMA31_70B, "lora": {"rank": 8}}, ONE_P5)
    # selective-mm recomputes the adapters' matmuls: it fits, and keeps more than full (the least recomputation).
    assert "smallest changes that fit: job.activationCheckpointing: selective-mm (" in problem
    assert "lora.rank" not in problem
    sizing = stack_sizing(config_for({**LLAMA31_70B, "lora": {"rank": 8}, "activationCheckpointing": "full"}, ONE_P5))
    assert sizing is not None and sizing.fits and sizing.job.lora_rank == 8
