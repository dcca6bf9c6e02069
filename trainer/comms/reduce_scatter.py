"""A reduce-scatter of sums for gloo (CPU), point to point: FSDP's custom reduce-scatter (parallelize.py) and the
vocabulary-sharded embedding's lookups (embedding.py) use it."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch.distributed.fsdp._fully_shard._fsdp_api import ReduceScatter


class PairwiseReduceScatter(ReduceScatter):
    """A reduce-scatter of sums made of point-to-point sends, for gloo (CPU).

    gloo has no reduce-scatter of its own: torch's gloo backend runs `reduce_scatter_tensor` as a copy of the whole
    input, an all-reduce of that copy and a copy of this rank's chunk out of it (seen in a profile of one step:
    clone, gloo:all_reduce, copy_ under `c10d::_reduce_scatter_base_`), so every gradient crosses the wire twice and
    is copied whole once. Here each rank sends every other rank the chunk that rank keeps and adds the chunks it
    receives to its own: each byte crosses once, and the first peer's chunk lands in the output itself, so two
    ranks need no memory beyond the output (more ranks: (world - 2) / world of the input).
    The sum runs in rank order (the first two terms commute exactly), so it is the same on every run.
    """

    def allocate(self, size: Sequence[int | torch.SymInt], *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        return torch.empty(size, dtype=dtype, device=device)

    def __call__(
        self,
        output_tensor: torch.Tensor,
        input_tensor: torch.Tensor,
        group: dist.ProcessGroup,
        op: object,
        async_op: bool = False,
    ) -> None:
        if op != dist.ReduceOp.SUM:
            raise ValueError(f"{type(self).__name__} sums; FSDP asked for {op}")
        world, rank = group.size(), group.rank()
        chunks = list(input_tensor.view(world, -1).unbind(0))
        peers = [peer for peer in range(world) if peer != rank]
        pending = []
        for peer in peers:
            pending.append(dist.isend(chunks[peer], group=group, group_dst=peer))
        for peer in peers:  # the peers' chunks of ours: the first into the output, the others alongside
            chunks[peer] = output_tensor if peer == peers[0] else torch.empty_like(output_tensor)
            pending.append(dist.irecv(chunks[peer], group=group, group_src=peer))
        for work in pending:
            work.wait()
        if world == 1:
            output_tensor.copy_(chunks[0])
            return
        # The output holds chunk 0 or 1 (the first peer's); adding the other gives chunk 0 + chunk 1.
        output_tensor.add_(chunks[1] if peers[0] == 0 else chunks[0])
        for chunk in chunks[2:]:
            output_tensor.add_(chunk)
