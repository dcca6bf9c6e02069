"""The input embedding sharded by vocabulary rows, moving token embeddings instead of the table.

An FSDP unit gathers the whole table (vocab x hidden: 98 MB in fp32 for a 32000 x 768 model) for every forward and
reduce-scatters a dense gradient of the same size after every backward, although a step touches only the rows of
its tokens. Here each rank keeps its FSDP shard of rows (the same rows, as the same Shard(0) DTensor, so the
optimizer, gradient clipping, checkpoints and export see what they saw before) and never gathers the table:
- forward: the ranks gather each other's token ids, each looks up the ids that fall in its rows (zeros elsewhere),
  and a reduce-scatter sums the ranks' lookups so that each rank gets its own tokens' embeddings: exactly one rank
  contributes each row, so the sum is the row itself, bit for bit;
- backward: the ranks gather each other's output gradients and each adds those of the tokens in its rows into its
  shard's gradient (index_add, in rank order).
Per step that moves ranks x tokens x hidden values each way (786 KB at 2 x 2 x 128 tokens of 768) instead of the
table twice, and the full table and its dense gradient never exist.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Shard

from trainer.comms.collectives import all_gather_single, reduce_scatter_single
from trainer.comms.reduce_scatter import PairwiseReduceScatter


def reduce_scatter_sum(output: torch.Tensor, input: torch.Tensor, group: dist.ProcessGroup) -> None:
    """Sum over ranks of `input`, this rank's chunk of it into `output`: point to point on gloo (CPU)."""
    if input.device.type == "cpu":
        PairwiseReduceScatter()(output, input, group, dist.ReduceOp.SUM)
    else:
        reduce_scatter_single(output, input, group)


def all_gather(tensor: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """Every rank's `tensor` (same shape on all), stacked in rank order along a new first dimension."""
    gathered = tensor.new_empty(group.size() * tensor.numel())
    all_gather_single(gathered, tensor.contiguous().view(-1), group)
    return gathered.view(group.size(), *tensor.shape)


class _ShardedLookup(torch.autograd.Function):
    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        shard: torch.Tensor,
        ids: torch.Tensor,
        start: int,
        group: dist.ProcessGroup,
        dtype: torch.dtype,
        padding_idx: int | None,
    ) -> torch.Tensor:
        local = all_gather(ids, group).flatten() - start  # every rank's ids, as rows of this shard
        owned = (local >= 0) & (local < shard.shape[0])
        rows = nn.functional.embedding(local.clamp(0, max(0, shard.shape[0] - 1)), shard).to(dtype)
        rows.masked_fill_(~owned.unsqueeze(-1), 0.0)
        out = rows.new_empty((ids.numel(), shard.shape[1]))
        reduce_scatter_sum(out.view(-1), rows.view(-1), group)
        if padding_idx is not None:  # nn.Embedding: the padding row gets no gradient
            owned &= local != padding_idx - start
        ctx.save_for_backward(local, owned)
        ctx.group, ctx.shard_shape, ctx.shard_dtype = group, shard.shape, shard.dtype
        return out.view(*ids.shape, shard.shape[1])

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        local, owned = ctx.saved_tensors
        grads = all_gather(grad.reshape(-1, grad.shape[-1]), ctx.group).flatten(0, 1)
        shard_grad = torch.zeros(ctx.shard_shape, dtype=ctx.shard_dtype, device=grad.device)
        if ctx.shard_shape[0] == 0:
            return shard_grad, None, None, None, None, None
        # Masked arithmetic, not local[owned]: indexing by a boolean mask calls nonzero, which makes the host wait for
        # the GPU every step. Tokens of other ranks' rows add a zero row to row 0 instead (torch.where, not a product:
        # an fp16 overflow's inf times 0 would be NaN).
        rows = torch.where(owned, local, 0)
        values = torch.where(owned.unsqueeze(-1), grads.to(ctx.shard_dtype), 0)
        shard_grad.index_add_(0, rows, values)
        return shard_grad, None, None, None, None, None


class VocabShardedEmbedding(nn.Module):
    """Stands in for an nn.Embedding (same parameter name and shape, `weight`), its rows sharded over a 1-D mesh."""

    def __init__(self, embedding: nn.Embedding, mesh: DeviceMesh, compute_dtype: torch.dtype | None) -> None:
        super().__init__()
        if mesh.ndim != 1:
            raise ValueError("VocabShardedEmbedding shards over a 1-D mesh")
        self.num_embeddings, self.embedding_dim = embedding.num_embeddings, embedding.embedding_dim
        self.padding_idx = embedding.padding_idx
        self.mesh, self.compute_dtype = mesh, compute_dtype
        rows = -(-self.num_embeddings // mesh.size())  # torch.chunk's chunk size, as FSDP shards
        self.start = min(self.num_embeddings, rows * mesh.get_local_rank())
        local_rows = max(0, min(rows, self.num_embeddings - self.start))
        full = embedding.weight
        local = torch.empty(local_rows, self.embedding_dim, dtype=full.dtype, device=full.device)
        shape, stride = full.shape, full.stride()
        self.weight = nn.Parameter(
            DTensor.from_local(local, mesh, [Shard(0)], shape=shape, stride=stride),
            requires_grad=full.requires_grad,  # frozen under LoRA (trainer/model/lora.py)
        )

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        # A Parameter over a DTensor (set in __init__): the DTensor's methods, which the Parameter type does not show.
        shard = self.weight.to_local()  # pyright: ignore[reportAttributeAccessIssue]
        dtype = self.compute_dtype or shard.dtype
        return _ShardedLookup.apply(shard, input_ids, self.start, self.mesh.get_group(), dtype, self.padding_idx)
