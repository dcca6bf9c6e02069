"""The host memory a background checkpoint save stages per node (sizing/host_memory.py), and the split of the writes
between replicas it follows (trainer/base/checkpoint/writers.py)."""

from __future__ import annotations

import pytest

from sizing.catalog import CATALOG
from sizing.fsx import checkpoint_bytes
from sizing.host_memory import checkpoint_tensors, host_staging, pod_memory_bytes
from sizing.memory import Job
from trainer.base.checkpoint.writers import assign_replicas, replica_loads
from trainer.base.model.presets import PRESETS
from trainer.base.units import GIB

P5 = CATALOG["p5.48xlarge"]
LLAMA_70B = PRESETS["llama3.1-70b"]


def job(strategy: str, lora_rank: int = 0) -> Job:
    return Job(LLAMA_70B, seq_len=4096, sharding_strategy=strategy, lora_rank=lora_rank)


def test_before_the_split_70b_under_hsdp_on_16_p5_pinned_its_whole_state_on_every_node() -> None:
    """The issue's figure: each node a replica of the whole 846 GB of fp32 weights and AdamW moments."""
    before = host_staging(job("HYBRID_SHARD"), P5, 16, spread=False)
    assert before.staged == pytest.approx(checkpoint_bytes(LLAMA_70B), rel=1e-3)
    assert 830e9 < before.staged < 860e9


def test_with_the_split_each_node_stages_a_sixteenth() -> None:
    after = host_staging(job("HYBRID_SHARD"), P5, 16)
    assert after.staged == pytest.approx(checkpoint_bytes(LLAMA_70B) / 16, rel=0.01)
    assert after.fits


def test_full_shard_stages_each_rank_its_own_shard_split_or_not() -> None:
    spread, whole = (host_staging(job("FULL_SHARD"), P5, 16, spread=s).staged for s in (True, False))
    assert spread == whole == pytest.approx(checkpoint_bytes(LLAMA_70B) / 16, rel=0.01)


def test_no_shard_staged_eight_whole_copies_per_node_before_and_a_sixteenth_now() -> None:
    before = host_staging(job("NO_SHARD"), P5, 16, spread=False)
    after = host_staging(job("NO_SHARD"), P5, 16)
    assert before.staged == pytest.approx(8 * checkpoint_bytes(LLAMA_70B), rel=1e-3) and not before.fits
    assert after.staged == pytest.approx(checkpoint_bytes(LLAMA_70B) / 16, rel=0.05)  # 128 replicas: coarser split


def test_lora_stages_the_adapters_and_their_moments_only() -> None:
    lora = host_staging(job("HYBRID_SHARD", lora_rank=16), P5, 16)
    adapters = checkpoint_bytes(LLAMA_70B, lora_rank=16)
    assert lora.staged == pytest.approx(adapters / 16, rel=0.05)
    assert not any(name.startswith("root.") for name in checkpoint_tensors(job("FULL_SHARD", lora_rank=16)))


def test_the_budget_is_the_pods_limit_less_the_ranks_and_the_page_cache() -> None:
    staging = host_staging(job("HYBRID_SHARD"), P5, 16)
    assert pod_memory_bytes(P5) == (2048 - 205) * GIB  # 10% of the node kept for the system
    assert staging.needed == staging.staged + 8 * 6 * GIB
    assert staging.available == int(0.9 * staging.pod)


def test_the_split_gives_every_item_to_one_replica_and_balances_them() -> None:
    sizes = {f"t{index}": (index * 7919) % 1000 + 1 for index in range(200)}
    owners = assign_replicas(sizes, 16)
    assert owners.keys() == sizes.keys() and set(owners.values()) == set(range(16))
    loads = replica_loads(sizes, 16)
    assert sum(loads) == sum(sizes.values())
    assert max(loads) - min(loads) <= max(sizes.values())  # greedy largest-first: within one item


def test_the_split_is_the_same_whatever_order_the_items_come_in() -> None:
    sizes = {f"t{index}": index % 5 + 1 for index in range(40)}
    assert assign_replicas(sizes, 3) == assign_replicas(dict(reversed(list(sizes.items()))), 3)
