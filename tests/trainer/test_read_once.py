"""Pretrained weights are read from storage once in total: on a 2-rank HSDP mesh (2 replicas x 1 shard) each tensor is
read by one replica and broadcast to the other, under FULL_SHARD each rank reads its own rows, and under LoRA the
frozen base alike; in every case the ranks read one copy of the files together, each rank less than one copy (so
replica 0 reading everything fails too), and every rank holds exactly the files' weights."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

from trainer.base.flags.config import LoraConfig
from trainer.model.build import (
    WeightsRead,
    build_meta_model,
    canonical_name,
    decoder_layers,
    init_buffers,
    load_pretrained_weights,
)
from trainer.model.lora import apply_lora, is_adapter

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]  # every test reads what two ranks loaded over gloo
WORLD = 2
CASES = ("hsdp", "full_shard", "lora_hsdp")


def llama_config() -> object:
    from transformers import LlamaConfig

    # Odd sizes, so FULL_SHARD's rows split unevenly.
    return LlamaConfig(
        vocab_size=301, hidden_size=48, intermediate_size=136, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip


def loaded_model(case: str, directory: Path) -> tuple[nn.Module, WeightsRead]:
    """The model built as the trainer builds it (meta, sharded, to_empty), its weights read from `directory`."""
    model = build_meta_model(llama_config())
    if case == "lora_hsdp":
        apply_lora(model, LoraConfig(rank=4), torch.bfloat16)
    shape, names = ((WORLD,), ("dp_shard",)) if case == "full_shard" else ((WORLD, 1), ("dp_replicate", "dp_shard"))
    mesh = init_device_mesh("cpu", shape, mesh_dim_names=names)
    for layer in decoder_layers(model):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    model.to_empty(device="cpu")
    init_buffers(model, torch.device("cpu"))
    return model, load_pretrained_weights(model, directory)


def load_on_rank(rank: int, tmp: str, directory: str) -> None:
    dist.init_process_group("gloo", store=dist.FileStore(f"{tmp}/store", WORLD), rank=rank, world_size=WORLD)
    try:
        for case in CASES:
            model, read = loaded_model(case, Path(directory))
            weights = {}
            for name, param in model.named_parameters():
                assert isinstance(param, DTensor)
                if not is_adapter(name):
                    weights[canonical_name(name)] = param.full_tensor()
            torch.save({"rank_read": read.rank, "total_read": read.total, "weights": weights}, f"{tmp}/{case}{rank}.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def loads(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A small Llama in HF format (bf16, as hub checkpoints are), then two ranks load it three ways."""
    from transformers import LlamaForCausalLM

    tmp = tmp_path_factory.mktemp("read_once")
    torch.manual_seed(5)
    LlamaForCausalLM(llama_config()).to(torch.bfloat16).save_pretrained(tmp / "model")  # pyright: ignore[reportArgumentType]
    mp.spawn(load_on_rank, args=(str(tmp), str(tmp / "model")), nprocs=WORLD)
    return tmp, tmp / "model"


def file_tensors(directory: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    found: dict[str, torch.Tensor] = {}
    for file in sorted(directory.glob("*.safetensors")):
        found.update(load_file(file))
    return found


@pytest.mark.parametrize("case", CASES)
def test_the_ranks_read_one_copy_of_the_weights_together(case: str, loads: tuple[Path, Path]) -> None:
    tmp, directory = loads
    one_copy = sum(t.numel() * t.element_size() for t in file_tensors(directory).values())
    reads = [torch.load(tmp / f"{case}{rank}.pt") for rank in range(WORLD)]
    assert sum(read["rank_read"] for read in reads) == one_copy  # twice that if both replicas read it all
    for read in reads:
        assert 0 < read["rank_read"] < one_copy  # replica 0 reading it all (and broadcasting) makes one copy too
        assert read["total_read"] == one_copy  # the job's sum, as each rank logs it


@pytest.mark.parametrize("case", CASES)
def test_every_rank_holds_the_files_weights(case: str, loads: tuple[Path, Path]) -> None:
    tmp, directory = loads
    files = file_tensors(directory)
    for rank in range(WORLD):
        weights = torch.load(tmp / f"{case}{rank}.pt")["weights"]
        assert weights.keys() == files.keys()
        for name, tensor in files.items():
            # fp32 master weights hold bf16 exactly; LoRA's base stays in bf16
            assert torch.equal(weights[name].to(tensor.dtype), tensor), (case, rank, name)
