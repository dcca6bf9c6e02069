"""How the model is sharded and compiled: which FSDP units gather their parameters when, and compile's full graphs."""

from __future__ import annotations

from collections import Counter
from typing import cast

import pytest
import torch
from torch import nn
from torch._dynamo.exc import Unsupported
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup
from torch.distributed.tensor import DTensor, Shard
from transformers import PreTrainedModel

from trainer.base.model.source import resolve_model
from trainer.model.build import build_meta_model, hf_config, init_buffers, init_weights
from trainer.parallel.embedding import VocabShardedEmbedding
from trainer.parallel.parallelize import apply_compile, apply_fsdp, embedding_by_rows, mixed_precision_policy


class FakeMesh:
    """What embedding_by_rows reads of a DeviceMesh."""

    def __init__(self, ndim: int, size: int) -> None:
        self.ndim, self._size = ndim, size

    def size(self) -> int:
        return self._size


TOKENS_PER_RANK = 2 * 16  # the batch all_gathers_per_unit runs


def sharded_tiny(
    reshard_after_forward: bool, mesh_shape: tuple[int, ...] = (1,), tokens_per_rank: int = TOKENS_PER_RANK
) -> PreTrainedModel:
    config = hf_config(resolve_model("tiny"))
    model = build_meta_model(config)
    assert isinstance(model, PreTrainedModel)
    names = ("dp_shard",) if len(mesh_shape) == 1 else ("dp_replicate", "dp_shard")
    mesh = init_device_mesh("cpu", mesh_shape, mesh_dim_names=names)
    apply_fsdp(model, mesh, mixed_precision_policy("fp32"), reshard_after_forward, tokens_per_rank)
    model.to_empty(device="cpu")
    init_buffers(model, torch.device("cpu"))
    init_weights(model, seed=0, std=config.initializer_range)
    return model


def all_gathers_per_unit(model: nn.Module, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each FSDP unit's parameters become whole (gathered) in one forward and backward."""
    names = {id(module): name or "root" for name, module in model.named_modules()}
    gathered: Counter[str] = Counter()
    to_unsharded = FSDPParamGroup._to_unsharded

    def counting(group: FSDPParamGroup) -> None:
        if not group.is_unsharded:  # the switch to the gathered parameters, once per all-gather
            gathered["+".join(names[id(module)] for module in group.modules)] += 1
        to_unsharded(group)

    monkeypatch.setattr(FSDPParamGroup, "_to_unsharded", counting)
    tokens = torch.randint(0, 256, (2, 16))
    model(input_ids=tokens).logits.sum().backward()
    return gathered


@pytest.mark.usefixtures("world_of_one")
def test_on_a_1d_mesh_the_embedding_is_never_gathered_and_keeps_its_rows_sharded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ranks exchange token embeddings and their gradients instead of the table (trainer/parallel/embedding.py)."""
    model = sharded_tiny(reshard_after_forward=True)
    gathered = all_gathers_per_unit(model, monkeypatch)
    assert not any("embed_tokens" in unit for unit in gathered), gathered
    embedding = model.get_input_embeddings()
    assert isinstance(embedding, VocabShardedEmbedding)
    assert dict(model.named_parameters())["model.embed_tokens.weight"] is embedding.weight  # the name checkpoints use
    assert isinstance(embedding.weight.grad, DTensor) and embedding.weight.grad.placements == (Shard(0),)


@pytest.mark.usefixtures("world_of_one")
def test_with_more_tokens_in_flight_than_vocabulary_rows_the_embedding_is_a_unit_gathered_for_forward_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Exchanging every rank's tokens would then move more than the table (embedding_by_rows)."""
    vocab = hf_config(resolve_model("tiny")).vocab_size
    model = sharded_tiny(reshard_after_forward=True, tokens_per_rank=vocab)
    assert not isinstance(model.get_input_embeddings(), VocabShardedEmbedding)
    gathered = all_gathers_per_unit(model, monkeypatch)
    assert gathered["model.embed_tokens"] == 1


def test_rows_only_while_fewer_tokens_than_rows_are_in_flight_on_a_1d_mesh() -> None:
    # embedding_by_rows reads only ndim and size() of its mesh.
    one_d, two_d = cast(DeviceMesh, FakeMesh(ndim=1, size=8)), cast(DeviceMesh, FakeMesh(ndim=2, size=8))
    assert embedding_by_rows(one_d, tokens_per_rank=256, vocab_size=32000)  # 2048 rows in flight
    assert not embedding_by_rows(one_d, tokens_per_rank=4096, vocab_size=32000)  # one p5 node: 32768
    assert not embedding_by_rows(two_d, tokens_per_rank=256, vocab_size=32000)


@pytest.mark.usefixtures("world_of_one")
def test_on_a_replicated_mesh_the_embedding_is_gathered_for_forward_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its backward needs the token ids and its output's gradient, never its weight."""
    model = sharded_tiny(reshard_after_forward=True, mesh_shape=(1, 1))
    gathered = all_gathers_per_unit(model, monkeypatch)
    assert gathered["model.embed_tokens"] == 1
    assert dict(model.named_parameters())["model.embed_tokens.weight"].grad is not None


@pytest.mark.usefixtures("world_of_one")
def test_the_output_layer_and_final_norm_are_one_unit_gathered_once(monkeypatch: pytest.MonkeyPatch) -> None:
    model = sharded_tiny(reshard_after_forward=True)
    gathered = all_gathers_per_unit(model, monkeypatch)
    assert gathered["model.norm+lm_head"] == 1  # last in forward, first in backward: kept gathered in between
    assert "root" not in gathered  # the root holds no parameters of its own


@pytest.mark.usefixtures("world_of_one")
@pytest.mark.parametrize(("reshard", "first_layer_gathers"), [(True, 2), (False, 1)], ids=["reshard", "keep"])
def test_decoder_layers_but_the_last_are_gathered_again_for_backward_only_when_resharded(
    reshard: bool, first_layer_gathers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last layer's backward follows the output layer's at once: it stays gathered from its forward to it."""
    model = sharded_tiny(reshard_after_forward=reshard)
    gathered = all_gathers_per_unit(model, monkeypatch)
    assert (gathered["model.layers.0"], gathered["model.layers.1"]) == (first_layer_gathers, 1)


class GraphBreakingLayer(nn.Module):
    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        torch._dynamo.graph_break()
        return hidden * 2


class Layers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([GraphBreakingLayer()])


class Stack(nn.Module):
    """The attribute layout apply_compile looks for: model.model.layers."""

    def __init__(self) -> None:
        super().__init__()
        self.model = Layers()


def test_compile_takes_each_layer_as_one_graph_or_fails() -> None:
    model = Stack()
    apply_compile(model)
    with pytest.raises(Unsupported):
        model.model.layers[0](torch.ones(2))


def test_selective_checkpointing_keeps_the_matmuls_attention_and_fp8s_amax() -> None:
    """FP8's tensor-wise amax (the max of |x| over a tensor, aten.max) is a full reduction: kept, not recomputed in
    backward, as torchtitan's op save list does; elementwise operations are recomputed."""
    from torch.utils.checkpoint import CheckpointPolicy

    from trainer.parallel.parallelize import _selective_policy  # pyright: ignore[reportPrivateUsage]

    aten = torch.ops.aten
    for kept in (aten.max.default, aten.mm.default, aten._scaled_mm.default, aten.addmm.default):
        assert _selective_policy()(None, kept) is CheckpointPolicy.MUST_SAVE, kept
    for recomputed in (aten.mul.Tensor, aten.silu.default, aten.abs.default):
        assert _selective_policy()(None, recomputed) is CheckpointPolicy.PREFER_RECOMPUTE, recomputed
