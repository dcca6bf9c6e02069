"""Which replica writes each item of a save, and which reads each tensor of the pretrained weights: one rule for the
trainer and the sizing model (sizing/host_memory.py), pure Python.

Under HYBRID_SHARD and NO_SHARD every replica group holds the same shards. DCP already writes each replicated item
once (torch 2.13 torch/distributed/checkpoint/_dedup_save_plans.py dedup_save_plans: of the ranks whose plans hold
an item, the one with the fewest planned bytes so far keeps it), but it decides in the coordinator's global plan,
after every rank has staged its whole state dict into host memory (DefaultStager, before async_save plans): 70B on
16 nodes would pin its 846 GB of weights and AdamW moments on every node to write 1/16 of them.

Here the split is decided before staging, by every rank alike from what every rank knows the same way (each item's
name and its global size): the largest item first, each to the replica with the fewest bytes so far (greedy
longest-processing-time; Graham 1969 bounds the largest share by the mean plus one item). Each rank then stages and
hands DCP only its own replica's items, so each node pins about 1/replicas of its replica's state and every node
still writes in parallel, as DCP's own balancing had them do. Replica 0 writing everything instead would pin the
whole state on its nodes and send it all through their network links: 1/replicas of the write bandwidth.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping


def replicas_of(counts: Iterable[int]) -> int:
    """The replica count of a model's replicated tensors (their ReplicaPlace.count, those above 1): what
    assign_replicas splits over, for the checkpoint's writers and the pretrained weights' readers alike; 1 when none
    is replicated. Several counts mean more than one replicate dimension, which neither split handles: refused."""
    found = {count for count in counts if count > 1}
    if len(found) > 1:
        raise ValueError(f"tensors replicated {sorted(found)} times: expected one replicate dimension")
    return found.pop() if found else 1


def assign_replicas(sizes: Mapping[str, int], replicas: int) -> dict[str, int]:
    """Item name -> the replica (0 .. replicas - 1) that writes it: the largest items first, each to the replica with
    the fewest bytes so far (the lower index on a tie; items of one size in name order), so every rank computes the
    same split."""
    if replicas < 1:
        raise ValueError(f"{replicas} replicas: expected at least 1")
    loads = [(0, replica) for replica in range(replicas)]
    owners: dict[str, int] = {}
    for name in sorted(sizes, key=lambda item: (-sizes[item], item)):
        load, replica = heapq.heappop(loads)
        owners[name] = replica
        heapq.heappush(loads, (load + sizes[name], replica))
    return owners


def replica_loads(sizes: Mapping[str, int], replicas: int) -> list[int]:
    """The bytes each replica writes under assign_replicas."""
    loads = [0] * replicas
    for name, replica in assign_replicas(sizes, replicas).items():
        loads[replica] += sizes[name]
    return loads
