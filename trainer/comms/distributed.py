"""Joining the job: the device this rank uses, its process group (NCCL on CUDA, gloo on CPU), and a second group
for the waits that are not training.

Two timeouts, because two kinds of waiting: a training collective that waits minutes for a peer means the peer is
gone (--timeout-minutes: fail, and let torchrun restart the group), while a rank waiting for another to finish
writing a 70B checkpoint, downloading weights or tokenising the data set is expected to wait long
(--checkpoint-timeout-minutes). The slow waits go through `io_group`, a gloo group of all ranks with the long
timeout: gloo because DCP's asynchronous save needs a CPU backend for its background collectives
(torch.distributed.checkpoint.async_save), and its own group so that those never interleave with training's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import cast

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor, Replicate

from trainer.base.flags.config import CheckpointConfig, ParallelConfig
from trainer.base.pod.env import DistEnv

TRAINING_TIMEOUT = timedelta(minutes=ParallelConfig.timeout_minutes)
WAIT_TIMEOUT = timedelta(minutes=CheckpointConfig.timeout_minutes)


def pick_device(device_type: str, env: DistEnv) -> torch.device:
    if device_type == "cuda":
        torch.cuda.set_device(env.local_rank)
        return torch.device("cuda", env.local_rank)
    return torch.device("cpu")


def init_distributed(
    env: DistEnv, device: torch.device, timeout: timedelta = TRAINING_TIMEOUT, wait_timeout: timedelta = WAIT_TIMEOUT
) -> None:
    """Join the process group torchrun describes; a plain process joins a group of one (same code path after).
    `timeout` bounds training collectives; `wait_timeout` the rendezvous (ranks start as their pods do)."""
    backend = "nccl" if device.type == "cuda" else "gloo"
    device_id = device if device.type == "cuda" else None
    if env.launched:
        # torchrun's agents share one TCP store for all restarts of the workers (torch 2.13 dynamic_rendezvous.py:
        # the rank-0 agent's server is kept across rounds), so the addresses the previous attempt's ranks published
        # would still be there: peers would connect to dead processes. Each attempt therefore works under its own
        # key prefix, named by the id every rank of it agrees on (trainer/base/pod/attempt.py), not by a node's own
        # count.
        store, rank, world_size = next(dist.rendezvous("env://", timeout=wait_timeout))
        store = dist.PrefixStore(f"trainer/attempt_{env.attempt}", store)
        dist.init_process_group(
            backend, store=store, rank=rank, world_size=world_size, device_id=device_id, timeout=timeout
        )
    else:
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, device_id=device_id)


def io_group(timeout: timedelta = WAIT_TIMEOUT, ranks: list[int] | None = None) -> dist.ProcessGroup:
    """A gloo group with the long timeout, of all ranks or of `ranks`. Every rank must call this, in the same order,
    member or not (torch.distributed.new_group)."""
    # torch types the result loosely (a rank outside `ranks` gets a placeholder); a member gets a ProcessGroup.
    return cast(dist.ProcessGroup, dist.new_group(ranks=ranks, backend="gloo", timeout=timeout))


def leave_distributed() -> None:
    dist.destroy_process_group()


@dataclass(frozen=True)
class ReplicaPlace:
    """Where this rank's shard of a tensor sits among the ranks that hold the same shard (the mesh's replicate
    dimension under HYBRID_SHARD and NO_SHARD)."""

    index: int
    """This rank's replica: its coordinate on the replicate dimension."""
    count: int
    """Replicas of the shard: 1 on a mesh without a replicated dimension (FULL_SHARD) or a plain tensor."""
    group: dist.ProcessGroup | None
    """The ranks holding the same shard, in replica order (the mesh's group for that dimension); None when alone."""


def replica_place(tensor: torch.Tensor) -> ReplicaPlace:
    """The replicas of `tensor`'s local shard: the mesh dimension its DTensor placement replicates over."""
    if not isinstance(tensor, DTensor):
        return ReplicaPlace(0, 1, None)
    mesh = tensor.device_mesh
    dims = [d for d, p in enumerate(tensor.placements) if isinstance(p, Replicate) and mesh.size(d) > 1]
    if not dims:
        return ReplicaPlace(0, 1, None)
    if len(dims) > 1:
        raise ValueError(f"replicated over {len(dims)} mesh dimensions: expected one (the replicate dimension)")
    return ReplicaPlace(mesh.get_local_rank(dims[0]), mesh.size(dims[0]), mesh.get_group(dims[0]))


def broadcast_shards(tensors: Iterable[torch.Tensor], group: dist.ProcessGroup, replica: int = 0) -> None:
    """Each local shard, in place, from `replica` to the same shard of the other replicas (`group`: the ranks
    holding it, ReplicaPlace.group): what one replica read from storage reaches the others over the network, so
    storage is read once. Every rank of the group passes the same tensors in the same order."""
    for tensor in tensors:
        if not tensor.is_contiguous():
            raise RuntimeError("a local shard is not contiguous: it cannot be broadcast in place")
        dist.broadcast(tensor, group=group, group_src=replica)
