"""The numbers a run derives from its flags and world size: device mesh shape and gradient accumulation.

Torch-free, so validation and the job builder compute exactly what the trainer will use.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer.base.flags.config import TrainConfig, config_problems
from trainer.base.flags.options import Facts
from trainer.base.pod.env import DistEnv


@dataclass(frozen=True)
class RunPlan:
    replicate: int
    """Size of the mesh's replicate dimension (1 for FULL_SHARD and SHARD_GRAD_OP)."""
    shard: int
    """Size of the mesh's shard dimension (1 for NO_SHARD)."""
    batch_size: int
    global_batch_size: int
    grad_accum: int
    """Micro steps per optimizer step on every rank."""

    @property
    def dp_size(self) -> int:
        """Every strategy is data parallel over all ranks: each rank takes its own slice of the global batch."""
        return self.replicate * self.shard


def mesh_shape(config: TrainConfig, env: DistEnv) -> tuple[int, int]:
    """(replicate, shard) sizes for the sharding strategy. Raises ValueError naming the flag when impossible."""
    strategy, world = config.parallel.sharding_strategy, env.world_size
    if strategy in ("FULL_SHARD", "SHARD_GRAD_OP"):
        return 1, world
    if strategy == "NO_SHARD":
        return world, 1
    groups = config.parallel.replicate_groups
    if groups is None:
        groups = env.num_nodes
        if groups is None:
            raise ValueError(
                f"--sharding-strategy HYBRID_SHARD: WORLD_SIZE {world} is not a multiple of LOCAL_WORLD_SIZE "
                f"{env.local_world_size}; pass --replicate-groups"
            )
    if groups < 1 or world % groups:
        raise ValueError(f"--replicate-groups {groups} does not divide the world size {world} (HYBRID_SHARD mesh)")
    return groups, world // groups


def make_plan(config: TrainConfig, env: DistEnv) -> RunPlan:
    replicate, shard = mesh_shape(config, env)
    batch, world = config.schedule.batch_size, env.world_size
    # The declared rule of --global-batch-size (base/flags/config.py whole_micro_steps), as validation refuses it.
    if problems := config_problems(config, Facts(world_size=world), paths=("schedule.global_batch_size",)):
        raise ValueError("; ".join(problems))
    global_batch = config.schedule.global_batch_size or batch * world
    return RunPlan(replicate, shard, batch, global_batch, global_batch // (batch * world))
