"""Host memory per node: what a checkpoint save stages there, and whether that fits in the worker pod. Pure Python.

A background save (--async-checkpoint: the job's saves are, sizing/fsx.py JOB_SAVES_IN_BACKGROUND) copies what each
rank writes into host memory before the write starts (DCP's DefaultStager, pinned on CUDA: page-locked, so never
swapped out nor reclaimed), and keeps those buffers from one save to the next (trainer/checkpoint/checkpointer.py
`stager`). What a rank writes is its shard of each tensor of the checkpoint: the fp32 master weights and AdamW's two
fp32 moments of every trained parameter (trainer/base/checkpoint/space.py, 12 bytes a parameter; under LoRA the adapters
alone: the frozen base is not saved, checkpointer._state_dict_options), padded as FSDP2 pads its shards
(sizing/memory.py shard_numel). On a replicated mesh (HYBRID_SHARD, NO_SHARD) only the tensors its replica writes
(trainer/base/checkpoint/writers.py assign_replicas, the split the trainer makes); before that split every rank staged
all of its shards, so each node held a whole replica's state: `spread=False` sizes that. Step counters, the scheduler,
the loss scale and the RNG state are a few bytes and not counted.

What the node has for it: the worker pod's memory limit (requests equal limits, workloads/job/pod.py resources: the
pinned pages count against it, and the kubelet's limit is what the node gives the pod), less each rank's own process
(RANK_PROCESS_BYTES) and a share kept for the page cache (PAGE_CACHE_FRACTION).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sizing.catalog import InstanceType
from sizing.memory import FP32, Job, Ranks, adapter_shapes, layer_parameter_shapes, root_parameter_shapes
from trainer.base.checkpoint.space import COPIES_PER_PARAMETER
from trainer.base.checkpoint.writers import assign_replicas
from trainer.base.units import GIB

# The pod's limit: the node's memory less what the system keeps (kubelet, containerd, the OS, daemon sets), as the
# job sets it (workloads/job/spec.py node_shape; tests/stack/test_host_fit.py checks the two agree for every type).
POD_RESERVED_FRACTION = 0.10
MIN_POD_RESERVED_GIB = 4
# One training process's own host memory, outside the checkpoint's staging: torch and transformers imported (0.24 GiB
# peak RSS measured on this project's CPU venv), the CUDA context's host side and the CUDA libraries it maps, NCCL's
# and the EFA plugin's host buffers, the step's pinned batches. An estimate (no GPU measured yet): check it against
# a rank's RSS on the first GPU run.
RANK_PROCESS_BYTES = 6 * GIB
# Kept free of pinned memory: the page cache of what the ranks read through memory maps (the token cache, the
# pretrained weights), the dirty pages of a checkpoint on their way to the file system, /dev/shm. Page cache is
# reclaimable, pinned pages are not: a pod whose pinned staging leaves it no page cache thrashes on every read.
PAGE_CACHE_FRACTION = 0.10


def pod_memory_bytes(instance: InstanceType) -> int:
    """The worker pod's memory limit on one node of `instance`."""
    reserved = max(MIN_POD_RESERVED_GIB, round(instance.memory_gib * POD_RESERVED_FRACTION))
    return (instance.memory_gib - reserved) * GIB


def checkpoint_tensors(job: Job) -> dict[str, tuple[int, int]]:
    """(rows, columns) of every tensor a checkpoint holds for each trained parameter: the parameter and its two AdamW
    moments (names are labels here, one per tensor)."""
    shape = job.shape
    per_layer = (
        adapter_shapes(shape, job.lora_rank, job.lora_targets) if job.lora_rank else layer_parameter_shapes(shape)
    )
    trained = [(f"layers.{layer}.{index}", dims) for layer in range(shape.num_layers) for index, dims in
               enumerate(per_layer)]  # fmt: skip
    if not job.lora_rank:
        trained += [(f"root.{index}", dims) for index, dims in enumerate(root_parameter_shapes(shape))]
    return {f"{name}/{copy}": dims for name, dims in trained for copy in range(COPIES_PER_PARAMETER)}


def staged_bytes_per_rank(job: Job, ranks: Ranks, spread: bool = True) -> list[int]:
    """Bytes each rank (global rank order) stages for a save: its padded shard of each tensor its replica writes."""
    replicate, shard = ranks.mesh(job.sharding_strategy)
    tensors = checkpoint_tensors(job)
    local = {name: FP32 * math.ceil(rows / shard) * cols for name, (rows, cols) in tensors.items()}
    if spread and replicate > 1:
        owners = assign_replicas({name: FP32 * rows * cols for name, (rows, cols) in tensors.items()}, replicate)
        per_replica = [0] * replicate
        for name, replica in owners.items():
            per_replica[replica] += local[name]
    else:
        per_replica = [sum(local.values())] * replicate
    return [per_replica[rank // shard] for rank in range(ranks.world_size)]


def staged_bytes_per_node(job: Job, ranks: Ranks, spread: bool = True) -> int:
    """The most any node stages: the sum over its ranks (torchrun numbers a node's ranks consecutively)."""
    per_rank = staged_bytes_per_rank(job, ranks, spread)
    nodes = -(-ranks.world_size // ranks.per_node)
    return max(sum(per_rank[node * ranks.per_node : (node + 1) * ranks.per_node]) for node in range(nodes))


@dataclass(frozen=True)
class HostStaging:
    """One node's host memory at a background save, in bytes."""

    staged: int
    """The checkpoint's share this node copies into pinned host memory (the most staged on any node)."""
    processes: int
    """The ranks' own processes (RANK_PROCESS_BYTES each)."""
    pod: int
    """The worker pod's memory limit."""

    @property
    def needed(self) -> int:
        return self.staged + self.processes

    @property
    def available(self) -> int:
        """What pinned staging and the processes may take: the pod's limit less the page cache's share."""
        return math.floor(self.pod * (1 - PAGE_CACHE_FRACTION))

    @property
    def fits(self) -> bool:
        return self.needed <= self.available


def host_staging(job: Job, instance: InstanceType, nodes: int, spread: bool = True) -> HostStaging:
    """The host memory a node of a `nodes`-node job on `instance` needs at a background save (`spread=False`: as
    before the trainer split the writes between replicas, every rank staging all of its shards)."""
    ranks = Ranks(nodes * instance.gpus, instance.gpus)
    return HostStaging(
        staged=staged_bytes_per_node(job, ranks, spread),
        processes=instance.gpus * RANK_PROCESS_BYTES,
        pod=pod_memory_bytes(instance),
    )
