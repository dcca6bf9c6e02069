"""Bad job config fails when the config is read, before any resource exists, with a message naming the key, the
value and what is allowed."""

from __future__ import annotations

from typing import Any

import pytest

from stack.fields import ConfigError
from stack.files import raw_stack_config
from stack.parse import parse_stack_config


def problems_of(stack: str, job: dict[str, Any] | None = None, gpu_nodes: dict[str, Any] | None = None) -> list[str]:
    raw = raw_stack_config(stack)
    raw["fsdp-eks:job"] = {**raw.get("fsdp-eks:job", {}), **(job or {})}
    raw["fsdp-eks:gpuNodes"] = {**raw.get("fsdp-eks:gpuNodes", {}), **(gpu_nodes or {})}
    with pytest.raises(ConfigError) as error:
        parse_stack_config(raw, stack)
    return error.value.problems


def test_a_misspelt_sharding_strategy_is_rejected() -> None:
    # First, as the key is parsed; the cross-key checks then see the default, FULL_SHARD (stack/parse.py), which p5-2's
    # bf16 all-reduce between nodes does not allow either.
    problem, *_ = problems_of("p5-2", {"shardingStrategy": "FULL_SHARDED"})
    assert problem.startswith("fsdp-eks:job.shardingStrategy: 'FULL_SHARDED' is not allowed")
    assert "FULL_SHARD, HYBRID_SHARD, SHARD_GRAD_OP, NO_SHARD" in problem


def test_hybrid_shard_on_one_node_is_rejected() -> None:
    (problem,) = problems_of("p5-1", {"shardingStrategy": "HYBRID_SHARD"})
    assert "shardingStrategy: 'HYBRID_SHARD' is not allowed on 1 node(s)" in problem


def test_a_batch_size_of_zero_is_rejected() -> None:
    (problem,) = problems_of("dev", {"batchSize": 0})
    assert problem == "fsdp-eks:job.batchSize: 0 is not allowed; expected a number >= 1"


def test_a_sequence_longer_than_the_model_allows_is_rejected() -> None:
    (problem,) = problems_of("p5-2", {"seqLen": 8192})
    assert problem == (
        "fsdp-eks:job.seqLen: 8192 is not allowed; exceeds the model's max_position_embeddings 4096 (llama2-7b); "
        "expected at most 4096"
    )


def test_more_nodes_than_the_node_group_has_are_rejected() -> None:
    (problem,) = problems_of("p5-2", {"minNodes": 3})
    assert problem == "fsdp-eks:job.minNodes: 3 is not allowed; expected 1 to gpuNodes.count (2)"


def test_a_job_without_gpu_nodes_is_rejected() -> None:
    problems = problems_of("dev", gpu_nodes={"count": 0})
    assert any(p.startswith("fsdp-eks:job.enabled: True is not allowed with gpuNodes.count 0") for p in problems)


def test_an_elastic_job_needs_a_global_batch_that_fits_every_node_count() -> None:
    (problem,) = problems_of("p5-4", {"minNodes": 3})  # 128 sequences do not split over 3 x 8 GPUs
    assert "globalBatchSize: 128 is not allowed with minNodes 3" in problem
    assert "fails at 3 node(s)" in problem


def test_an_elastic_job_needs_a_fixed_global_batch() -> None:
    (problem,) = problems_of("p5-4", {"minNodes": 2, "globalBatchSize": None})
    assert problem.startswith("fsdp-eks:job.globalBatchSize: None is not allowed with minNodes 2")


def test_an_invalid_checkpoint_claim_name_is_rejected() -> None:
    (problem,) = problems_of("p5-2", {"checkpointClaim": "Checkpoints_FSx"})
    assert problem.startswith("fsdp-eks:job.checkpointClaim: 'Checkpoints_FSx' is not allowed")


def test_an_unknown_nccl_debug_level_is_rejected() -> None:
    (problem,) = problems_of("dev", {"ncclDebug": "VERBOSE"})
    assert problem == "fsdp-eks:job.ncclDebug: 'VERBOSE' is not allowed; expected one of VERSION, WARN, INFO, TRACE"


def test_all_problems_are_reported_at_once() -> None:
    problems = problems_of("p5-1", {"shardingStrategy": "HYBRID_SHARD", "batchSize": 0, "seqLen": 100000})
    assert len(problems) == 3
