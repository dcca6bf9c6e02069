"""Loading a checkpoint, reading each byte from the file system once.

Under HYBRID_SHARD and NO_SHARD every replica group holds the same shards, so a plain DCP load would have each group
read the whole checkpoint: 16 nodes of HYBRID_SHARD read it 16 times, from a file system whose throughput is the
bottleneck. Here the first replica group alone reads the sharded tensors (model and optimizer DTensors), then
broadcasts each of its local shards to the same shard of the other replicas over the mesh's replicate group (the
network, not the file system). The small rest (step counters, scheduler, loss scale, progress, RNG) is read by every
rank. The bytes read are counted as DCP's FileSystemReader reads them: the stored length of every item it loads.

A checkpoint on S3 (the durable tier, trainer/checkpoint/durable.py) loads the same way, through the S3 connector's
reader (trainer/base/s3/dcp.py), a FileSystemReader too: S3 is read once as well, and counted alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.tensor import DTensor

from trainer.base.s3.uri import S3Uri
from trainer.checkpoint.counting import Counting, CountingReader
from trainer.comms.distributed import broadcast_shards


@dataclass(frozen=True)
class Replicas:
    """A replicated mesh (replicate dimension > 1): who reads, and where its shards go."""

    group: dist.ProcessGroup
    """This rank's replicate group (the mesh's): the same shard on every replica, group rank 0 in the first."""
    first: dist.ProcessGroup | None
    """The first replica's ranks (a long-timeout gloo group), which read; None on the other ranks."""


Source = Path | S3Uri
"""Where a checkpoint is: a directory (--checkpoint-dir) or an S3 prefix (the durable tier, --resume-from)."""


def reader(source: Source) -> Counting:
    if isinstance(source, S3Uri):
        from trainer.checkpoint.s3_reader import CountingS3Reader  # the S3 connector: only for a load from S3

        return CountingS3Reader(source)
    return CountingReader(str(source))


def split(tree: dict[str, Any], wanted: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two nested dicts with the same keys as `tree`: leaves for which `wanted(leaf)` holds, and the others."""
    chosen: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            inner_chosen, inner_rest = split(value, wanted)
            if inner_chosen:
                chosen[key] = inner_chosen
            if inner_rest:
                rest[key] = inner_rest
        elif wanted(value):
            chosen[key] = value
        else:
            rest[key] = value
    return chosen, rest


def merge(tree: dict[str, Any], loaded: dict[str, Any]) -> None:
    """Put the loaded values back into `tree` (DCP loads tensors in place but replaces other leaves)."""
    for key, value in loaded.items():
        if isinstance(value, dict):
            merge(tree[key], value)
        else:
            tree[key] = value


def _read(state: dict[str, Any], source: Source, group: dist.ProcessGroup) -> int:
    counting = reader(source)
    dcp.load(state, storage_reader=counting, process_group=group)
    return counting.bytes_read


def _local_tensors(tree: dict[str, Any]) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    for value in tree.values():
        if isinstance(value, dict):
            found += _local_tensors(value)
        else:
            found.append(value.to_local())
    return found


def load_state(saved: dict[str, Any], path: Source, io: dist.ProcessGroup, replicas: Replicas | None) -> int:
    """Load `path` into the state dict `saved` (in place); the bytes read by all ranks together."""
    if replicas is None:
        read = _read(saved, path, io)
    else:
        sharded, rest = split(saved, lambda leaf: isinstance(leaf, DTensor))
        read = _read(rest, path, io)
        merge(saved, rest)
        if replicas.first is not None:
            read += _read(sharded, path, replicas.first)
        dist.barrier(group=io)  # the first replica has read (a long wait: the io group's timeout, not training's)
        broadcast_shards(_local_tensors(sharded), replicas.group)
    total = torch.tensor([read], dtype=torch.int64)
    dist.all_reduce(total, group=io)
    return int(total[0])
