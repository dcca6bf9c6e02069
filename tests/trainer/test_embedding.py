"""The vocabulary-sharded embedding gives nn.Embedding's outputs and gradients, on 2 and 3 ranks (uneven rows)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor

from trainer.model.build import local_rows
from trainer.parallel.embedding import VocabShardedEmbedding

VOCAB, DIM, BATCH, SEQ = 11, 4, 2, 5  # 11 rows: uneven shards on 2 and 3 ranks


def full_weight() -> torch.Tensor:
    return torch.randn(VOCAB, DIM, generator=torch.Generator().manual_seed(0))


def rank_ids(rank: int) -> torch.Tensor:
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(10 + rank))
    ids[0, :3] = 3  # a row used several times, by every rank
    return ids


def rank_grad(rank: int) -> torch.Tensor:
    return torch.randn(BATCH, SEQ, DIM, generator=torch.Generator().manual_seed(20 + rank))


def sharded_on_rank(rank: int, world: int, padding_idx: int | None, store_path: str, out_dir: str) -> None:
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank, world_size=world)
    try:
        mesh = init_device_mesh("cpu", (world,))
        with torch.device("meta"):
            plain = nn.Embedding(VOCAB, DIM, padding_idx=padding_idx)
        sharded = VocabShardedEmbedding(plain, mesh, compute_dtype=None)
        sharded.to_empty(device="cpu")
        weight = sharded.weight
        assert isinstance(weight, DTensor)  # the table's rows, sharded over the mesh
        start, stop = local_rows(weight)
        with torch.no_grad():
            weight.to_local().copy_(full_weight()[start:stop])
        out = sharded(rank_ids(rank))
        out.backward(rank_grad(rank))
        grad = weight.grad
        assert isinstance(grad, DTensor)
        torch.save({"out": out.detach(), "grad": grad.to_local(), "rows": (start, stop)},
                   Path(out_dir) / f"{rank}.pt")  # fmt: skip
        # Every rank past its last collective before any tears the group down: a rank that destroys it while its
        # peer's gloo pair is still in use can abort the peer ("terminate called without an active exception").
        dist.barrier()
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # two and three ranks over gloo
@pytest.mark.parametrize(("world", "padding_idx"), [(2, None), (3, None), (2, 3)])
def test_outputs_and_gradients_are_nn_embeddings(world: int, padding_idx: int | None, tmp_path: Path) -> None:
    args = (world, padding_idx, str(tmp_path / "store"), str(tmp_path))
    mp.spawn(sharded_on_rank, args=args, nprocs=world)
    # One nn.Embedding over every rank's tokens, in rank order: the gradient a data-parallel step sums.
    plain = nn.Embedding(VOCAB, DIM, padding_idx=padding_idx)
    with torch.no_grad():
        plain.weight.copy_(full_weight())
    ids = torch.cat([rank_ids(rank) for rank in range(world)])
    outs = plain(ids)
    outs.backward(torch.cat([rank_grad(rank) for rank in range(world)]))
    covered = 0
    for rank in range(world):
        result = torch.load(tmp_path / f"{rank}.pt")
        assert torch.equal(result["out"], outs[rank * BATCH : (rank + 1) * BATCH].detach()), rank  # bit for bit
        start, stop = result["rows"]
        assert plain.weight.grad is not None
        torch.testing.assert_close(result["grad"], plain.weight.grad[start:stop], rtol=1e-6, atol=1e-7)
        covered += stop - start
    assert covered == VOCAB
