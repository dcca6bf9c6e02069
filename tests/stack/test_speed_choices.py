"""The p5 stacks (and the 16-node p4de one) run what the sizing model favours: per-block compile, no activation
checkpointing where it fits, the all-reduce between nodes in bf16 under HYBRID_SHARD; jobSizing shows each and its
step time reflects it."""

from __future__ import annotations

import dataclasses

import pytest

from stack.fields import NAMESPACE, ConfigError
from stack.files import load_stack_config, raw_stack_config, stack_names
from stack.fit import sizing_summary, stack_sizing
from stack.parse import parse_stack_config
from stack.trainer_config import stack_trainer_config
from trainer.base.flags.config import parse_args, to_argv

GPU_STACKS = [name for name in stack_names() if name.startswith(("p5-", "p4de-16"))]

JOB = f"{NAMESPACE}:job"


def test_the_gpu_stacks_are_the_ones_meant() -> None:
    assert {"p5-1", "p5-2", "p5-4", "p5-8", "p5-16", "p4de-16", "p5-1-llama70b-lora"} <= set(GPU_STACKS)


@pytest.mark.parametrize("stack", GPU_STACKS)
def test_each_gpu_stack_compiles_and_all_reduces_in_bf16_between_nodes_under_hsdp(stack: str) -> None:
    config = load_stack_config(stack)
    parallel = parse_args(to_argv(stack_trainer_config(config.job))).parallel  # what its pods' trainer parses
    assert parallel.compile
    hsdp = parallel.sharding_strategy == "HYBRID_SHARD"
    assert parallel.all_reduce_dtype == ("bf16" if hsdp else "fp32")
    summary = sizing_summary(config)
    assert summary is not None and summary["fits"]
    assert (summary["compile"], summary["allReduceDtype"]) == (True, parallel.all_reduce_dtype)


@pytest.mark.parametrize("stack", GPU_STACKS)
def test_each_gpu_stack_runs_the_fastest_checkpointing_that_fits(stack: str) -> None:
    config = load_stack_config(stack)
    chosen = stack_sizing(config)
    assert chosen is not None and chosen.throughput is not None
    for mode in ("none", "selective", "selective-mm", "full"):
        other = stack_sizing(
            dataclasses.replace(config, job=dataclasses.replace(config.job, activation_checkpointing=mode))
        )
        assert other is not None and other.throughput is not None
        if other.fits:
            assert chosen.throughput.step_s <= other.throughput.step_s, mode


def test_compile_and_the_bf16_all_reduce_shorten_the_16_node_step() -> None:
    config = load_stack_config("p5-16")

    def step_s(**changes: object) -> float:
        summary = sizing_summary(dataclasses.replace(config, job=dataclasses.replace(config.job, **changes)))
        assert summary is not None and summary["time"] is not None
        return summary["time"]["stepTimeS"]

    shipped = step_s()
    assert shipped < step_s(all_reduce_dtype="fp32") < step_s(all_reduce_dtype="fp32", compile=False)
    assert shipped < step_s(compile=False)


def _preview_problems(stack: str, job: dict[str, object]) -> list[str]:
    raw = raw_stack_config(stack)
    raw[JOB] = {**raw.get(JOB, {}), **job}
    with pytest.raises(ConfigError) as refused:
        parse_stack_config(raw, stack)
    return refused.value.problems


@pytest.mark.parametrize("strategy", ["FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"])
def test_a_bf16_all_reduce_without_hsdp_is_refused_at_preview_as_the_trainer_refuses_it(strategy: str) -> None:
    problems = _preview_problems("p5-2", {"shardingStrategy": strategy, "allReduceDtype": "bf16"})
    rule = f"only with job.shardingStrategy HYBRID_SHARD (not {strategy})"  # the trainer's: only with --sharding-...
    assert f"fsdp-eks:job.allReduceDtype: 'bf16' is not allowed; {rule}" in problems
