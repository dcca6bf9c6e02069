"""Gradient reduction on CPU: the point-to-point reduce-scatter for gloo, and the plain sums FSDP is set to."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule

from trainer.base.model.source import resolve_model
from trainer.comms.reduce_scatter import PairwiseReduceScatter
from trainer.model.build import build_meta_model, hf_config
from trainer.parallel.parallelize import apply_fsdp, mixed_precision_policy

CHUNK = 1000  # elements each rank keeps


def rank_input(rank: int, world: int) -> torch.Tensor:
    return torch.randn(world * CHUNK, generator=torch.Generator().manual_seed(rank))


def reduce_scatter_on_rank(rank: int, world: int, store_path: str, out_dir: str) -> None:
    store = dist.FileStore(store_path, world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    try:
        output = torch.full((CHUNK,), float("nan"))
        world_group = dist.group.WORLD
        assert world_group is not None  # init_process_group above made it
        PairwiseReduceScatter()(output, rank_input(rank, world), world_group, dist.ReduceOp.SUM)
        torch.save(output, Path(out_dir) / f"{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # two and three ranks over gloo
@pytest.mark.parametrize("world", [2, 3])
def test_each_rank_gets_the_sum_of_its_chunk_over_ranks_in_rank_order(world: int, tmp_path: Path) -> None:
    mp.spawn(reduce_scatter_on_rank, args=(world, str(tmp_path / "store"), str(tmp_path)), nprocs=world)
    inputs = [rank_input(rank, world).view(world, CHUNK) for rank in range(world)]
    for rank in range(world):
        expected = inputs[0][rank].clone()
        for other in inputs[1:]:
            expected += other[rank]
        # Bit for bit: the same additions in the same order as a sum over ranks 0, 1, 2.
        assert torch.equal(torch.load(tmp_path / f"{rank}.pt"), expected), rank


def test_anything_but_a_sum_is_refused() -> None:
    with pytest.raises(ValueError, match="sums"):
        PairwiseReduceScatter()(torch.empty(1), torch.empty(1), None, dist.ReduceOp.MAX)  # type: ignore[arg-type]


@pytest.mark.usefixtures("world_of_one")
def test_every_unit_sums_its_gradients_without_dividing_and_uses_the_pairwise_reduce_scatter_on_cpu() -> None:
    """The loss is divided by the global batch's token count already; an average over ranks would divide again."""
    model = build_meta_model(hf_config(resolve_model("tiny")))
    apply_fsdp(model, init_device_mesh("cpu", (1,)), mixed_precision_policy("fp32"), True, tokens_per_rank=32)
    groups = [m._get_fsdp_state()._fsdp_param_group for m in model.modules() if isinstance(m, FSDPModule)]
    groups = [group for group in groups if group is not None]
    assert len(groups) >= 3  # layers, embedding, head
    for group in groups:
        assert group.gradient_divide_factor == 1.0
        assert group.force_sum_reduction_for_comms
        assert isinstance(group._reduce_scatter_comm, PairwiseReduceScatter)
