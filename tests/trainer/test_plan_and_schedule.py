"""Derived numbers: mesh shape per strategy, gradient accumulation, learning-rate schedule."""

from __future__ import annotations

import itertools

import pytest

from trainer.base.flags.config import OptimConfig, parse_args
from trainer.base.flags.parallel_plan import make_plan, mesh_shape
from trainer.base.pod.env import DistEnv, read_env

TWO_NODES_OF_FOUR = DistEnv(rank=5, world_size=8, local_rank=1, local_world_size=4)


@pytest.mark.parametrize(
    "strategy, expected",
    [("FULL_SHARD", (1, 8)), ("SHARD_GRAD_OP", (1, 8)), ("HYBRID_SHARD", (2, 4)), ("NO_SHARD", (8, 1))],
)
def test_mesh_shape_per_strategy(strategy: str, expected: tuple[int, int]) -> None:
    assert mesh_shape(parse_args(["--sharding-strategy", strategy]), TWO_NODES_OF_FOUR) == expected


def test_gradient_accumulation_keeps_the_global_batch() -> None:
    config = parse_args(["--batch-size", "2", "--global-batch-size", "32"])
    assert make_plan(config, TWO_NODES_OF_FOUR).grad_accum == 2
    assert make_plan(config, DistEnv()).grad_accum == 16


def test_env_is_read_from_torchrun_variables() -> None:
    env = read_env({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
                    "TORCHELASTIC_RESTART_COUNT": "1"})  # fmt: skip
    assert (env.rank, env.world_size, env.local_rank, env.num_nodes, env.restart_count) == (3, 4, 1, 2, 1)
    assert read_env({}) == DistEnv()


def test_lr_schedule_warms_up_then_decays_to_min_lr() -> None:
    from trainer.optim import lr_factor

    config = OptimConfig(lr=1.0, warmup_steps=4, min_lr=0.1, lr_schedule="cosine")
    factors = [lr_factor(i, config, total_steps=10) for i in range(10)]
    assert factors[:4] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert factors[4] == pytest.approx(1.0)
    assert factors[-1] == pytest.approx(0.1)
    assert all(a >= b for a, b in itertools.pairwise(factors[4:]))
    linear = OptimConfig(lr=1.0, warmup_steps=0, lr_schedule="linear")
    assert [lr_factor(i, linear, total_steps=3) for i in range(3)] == pytest.approx([1.0, 0.5, 0.0])
    constant = OptimConfig(lr=1.0, lr_schedule="constant")
    assert lr_factor(99, constant, total_steps=10) == 1.0
