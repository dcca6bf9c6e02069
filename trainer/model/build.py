"""Model creation in three named steps: build on the meta device, (shard,) `to_empty`, then fill the weights.

Weights are filled per parameter into each rank's own shard, so no rank ever holds the whole model:
- presets: `init_weights` draws each full tensor from a generator seeded by (--seed, parameter name) and copies
  this rank's rows, so the model is the same for any world size and sharding strategy;
- pretrained: `load_pretrained_weights` reads only this rank's rows of each tensor from the safetensors files
  (memory-mapped slices), so 8 ranks of a 70B model do not need 8 full copies in host memory; on a replicated mesh
  one replica reads each tensor and broadcasts it to the others, so the files are read once in total.
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import DTensor, Shard

from trainer.base.checkpoint.space import format_bytes
from trainer.base.checkpoint.writers import assign_replicas, replicas_of
from trainer.base.model.source import ModelSource
from trainer.comms.distributed import broadcast_shards, replica_place
from trainer.model.attention import document_attention
from trainer.model.lora import adapter_init_bound, is_adapter

log = logging.getLogger(__name__)

# Wrappers that activation checkpointing, torch.compile and LoRA (peft's lora.Linear holds the original layer as
# base_layer) may add to a module's parameter names.
WRAPPER_PREFIXES = ("_checkpoint_wrapped_module.", "_orig_mod.", "base_layer.")


def hf_config(source: ModelSource) -> Any:
    """The transformers config of the model: the preset's family's config class built from its shape
    (ModelShape.config_kwargs), or read from config.json."""
    from transformers import AutoConfig

    if source.kind == "preset":
        config = AutoConfig.for_model(source.shape.model_type, **source.shape.config_kwargs())
    else:
        config = AutoConfig.from_pretrained(str(source.directory) if source.directory else source.name)
    config.use_cache = False
    return config


def build_meta_model(config: Any) -> nn.Module:
    """The model's structure on the meta device: no memory, no initialisation yet."""
    from transformers import AutoModelForCausalLM

    # Master weights are fp32 whatever the config says: from_config builds in `config.dtype` (transformers 5), and
    # Llama 2's configs say float16, so parameters, gradients and AdamW moments would be fp16 (AdamW's eps 1e-8
    # is 0 in fp16, and the loss turns NaN). Compute in bf16/fp16 comes from the MixedPrecisionPolicy instead.
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, attn_implementation=document_attention(), dtype=torch.float32)
    return model


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The repeated transformer blocks of a Llama-shaped causal LM (the unit of sharding and checkpointing)."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    if not isinstance(layers, nn.ModuleList):
        raise TypeError(f"{type(model).__name__}: expected decoder layers at model.model.layers")
    return layers


def final_norm(model: nn.Module) -> nn.Module:
    """The norm after the last decoder layer, before the output layer."""
    norm = getattr(getattr(model, "model", None), "norm", None)
    if not isinstance(norm, nn.Module):
        raise TypeError(f"{type(model).__name__}: expected the final norm at model.model.norm")
    return norm


def canonical_name(name: str) -> str:
    """A parameter's name as in the model's state dict (without wrapper prefixes)."""
    for prefix in WRAPPER_PREFIXES:
        name = name.replace(prefix, "")
    return name


def local_rows(param: torch.Tensor) -> tuple[int, int]:
    """[start, stop) rows of the full tensor that this rank holds (FSDP shards dim 0 like torch.chunk)."""
    if not isinstance(param, DTensor):
        return 0, param.shape[0]
    start, rows = 0, param.shape[0]
    for mesh_dim, placement in enumerate(param.placements):
        if isinstance(placement, Shard):
            if placement.dim != 0:
                raise ValueError(f"unsupported placement {placement}: only dim-0 sharding")
            size = param.device_mesh.size(mesh_dim)
            chunk = -(-rows // size)  # ceil: torch.chunk's chunk size
            start += chunk * param.device_mesh.get_local_rank(mesh_dim)
            rows = max(0, min(chunk, rows - chunk * param.device_mesh.get_local_rank(mesh_dim)))
    return start, start + rows


def _local(param: torch.Tensor) -> torch.Tensor:
    return param.to_local() if isinstance(param, DTensor) else param


def is_norm_weight(name: str) -> bool:
    """RMSNorm weights: the per-layer norms, the final one and Qwen3's per-head q_norm/k_norm alike."""
    return name.endswith("norm.weight")


def is_bias(name: str) -> bool:
    """Linear biases (Qwen2's q/k/v projections, Llama's and Qwen3's with attention_bias)."""
    return name.endswith(".bias")


@torch.no_grad()
def init_weights(model: nn.Module, seed: int, std: float) -> None:
    """Random init of every parameter: N(0, std) for matrices and embeddings, ones for RMSNorm weights, zeros for
    biases (as transformers' PreTrainedModel._init_weights does: modeling_utils.py, init.zeros_(module.bias)).

    Each full tensor comes from its own generator, seeded from --seed and the parameter's name, on the
    training device, in fp32 (a base held in bf16 under LoRA is the fp32 draw rounded); the rank keeps only its rows.
    Same weights for any world size or sharding strategy. LoRA adapters: init_adapters.
    """
    for name, param in model.named_parameters():
        if is_adapter(name):
            continue
        name = canonical_name(name)
        start, stop = local_rows(param)
        local = _local(param)
        if is_norm_weight(name) or is_bias(name):
            local.fill_(1.0 if is_norm_weight(name) else 0.0)
            continue
        generator = torch.Generator(device=local.device).manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
        full = torch.empty(param.shape, device=local.device, dtype=torch.float32).normal_(0.0, std, generator=generator)
        local.copy_(full[start:stop])


@torch.no_grad()
def init_adapters(model: nn.Module, seed: int) -> None:
    """LoRA adapters as peft initialises them (peft/tuners/lora/layer.py LoraLayer.reset_lora_parameters,
    init_lora_weights=True): A kaiming-uniform (a=sqrt(5)), B zeros, so the model starts as its base. Each full A from
    a generator seeded by --seed and its name, this rank's rows kept: the same adapters for any world size."""
    for name, param in model.named_parameters():
        if not is_adapter(name):
            continue
        local = _local(param)
        if ".lora_B." in name:
            local.zero_()
            continue
        name = canonical_name(name)
        start, stop = local_rows(param)
        generator = torch.Generator(device=local.device).manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
        bound = adapter_init_bound(param.shape[1])
        full = torch.empty(param.shape, device=local.device, dtype=torch.float32).uniform_(
            -bound, bound, generator=generator
        )
        local.copy_(full[start:stop])


@torch.no_grad()
def init_buffers(model: nn.Module, device: torch.device) -> None:
    """Recompute the non-persistent buffers (rotary frequencies) that `to_empty` left uninitialised.

    Every buffer must be recomputed here: an unknown buffer is an error, never uninitialised memory.
    """
    done = set()
    for module_name, module in model.named_modules():
        if type(module).__name__.endswith("RotaryEmbedding"):
            fresh = type(module)(config=module.config)
            for buffer_name, value in fresh.named_buffers(recurse=False):
                getattr(module, buffer_name).copy_(value.to(device))
                done.add(f"{module_name}.{buffer_name}")
    missing = [name for name, _ in model.named_buffers() if name not in done]
    if missing:
        raise RuntimeError(f"no initialisation for buffers {missing}")


def safetensors_index(directory: Path) -> dict[str, Path]:
    """Tensor name -> the safetensors file that holds it."""
    from safetensors import safe_open

    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"--model {directory}: no *.safetensors files")
    index = {}
    for file in files:
        with safe_open(file, framework="pt") as handle:
            names = handle.keys()  # safe_open handles are not dicts: `in handle` does not work
            index.update(dict.fromkeys(names, file))
    return index


def _check_shapes(handles: dict[Path, Any], index: dict[str, Path], base: list[tuple[str, nn.Parameter]]) -> None:
    """Every rank, before any reads: a tensor shaped unlike the model fails every rank alike (from the files'
    headers), not only the rank that reads it while the others wait in its broadcast."""
    for name, param in base:
        name = canonical_name(name)
        shape = tuple(_open(handles, index[name]).get_slice(name).get_shape())
        if shape != tuple(param.shape):
            raise ValueError(f"{name}: checkpoint shape {list(shape)} != model shape {tuple(param.shape)}")


def _open(handles: dict[Path, Any], file: Path) -> Any:
    from safetensors import safe_open

    if file not in handles:
        handles[file] = safe_open(file, framework="pt")
    return handles[file]


def _read_rows(handle: Any, name: str, param: torch.Tensor) -> int:
    """Copy this rank's rows of `name` into its shard of `param`; the bytes read (the rows, in the file's dtype)."""
    start, stop = local_rows(param)
    rows = handle.get_slice(name)[start:stop]  # a memory-mapped slice: only these rows are read
    local = _local(param)
    local.copy_(rows.to(device=local.device, dtype=local.dtype))
    return rows.numel() * rows.element_size()


@dataclass(frozen=True)
class WeightsRead:
    """The bytes of the pretrained weights read from storage (the rows read, in the files' dtype)."""

    rank: int
    """By this rank: under HYBRID_SHARD about 1/replicas of its shard's bytes, the rest reached it by broadcast."""
    total: int
    """By all ranks together: one copy of the files' weights."""


@torch.no_grad()
def load_pretrained_weights(model: nn.Module, directory: Path) -> WeightsRead:
    """Copy this rank's rows of every parameter from the safetensors files (reads only those bytes), in the
    parameter's dtype; LoRA adapters are not in them (init_adapters). The bytes this rank read and all ranks read
    together, logged by each rank and returned.

    Storage is read once in total. On a replicated mesh (HYBRID_SHARD, NO_SHARD) each tensor is read by one replica's
    ranks, each its own rows, and broadcast to the same shard of the other replicas over the network
    (trainer/comms/distributed.py broadcast_shards, as the resume path does, trainer/checkpoint/load.py). The
    replica reading a tensor is the one trainer/base/checkpoint/writers.py assign_replicas gives it, so each replica's
    nodes read about 1/replicas of the model through their own links (replica 0 alone would read it all through its
    nodes'). The reads are not all at once: the tensors go in the model's order, each read by its owner while the
    other replicas wait in its broadcast. Under gloo (CPU) the broadcast blocks the host until it is done, so the
    replicas read in turn, one tensor at a time. Under NCCL the call returns once the broadcast is queued on NCCL's
    stream (torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp, the class comment: collectives are asynchronous and
    wait() blocks the current CUDA stream, not the host), so a replica goes on to read its next tensor while earlier
    broadcasts are in flight and the replicas' reads overlap in part; how much is not measured here.
    FULL_SHARD and SHARD_GRAD_OP hold no replicas: every rank reads its own rows, once in total too. Under LoRA the
    frozen base is read this way, the adapters drawn by init_adapters."""
    index = safetensors_index(directory)
    base = [(name, param) for name, param in model.named_parameters() if not is_adapter(name)]  # LoRA: init_adapters
    missing = [canonical_name(n) for n, _ in base if canonical_name(n) not in index]
    if missing:
        raise KeyError(f"--model {directory}: the checkpoint lacks {missing[:5]}{'...' if len(missing) > 5 else ''}")
    places = {name: replica_place(param) for name, param in base}
    replicated = {name: place for name, place in places.items() if place.count > 1}
    sizes = {name: base_param.numel() * base_param.element_size() for name, base_param in base if name in replicated}
    owners = assign_replicas(sizes, replicas_of(p.count for p in replicated.values())) if replicated else {}
    handles: dict[Path, Any] = {}
    read = 0
    try:
        _check_shapes(handles, index, base)
        for name, param in base:
            place, file_name = places[name], canonical_name(name)
            owner = owners.get(name, place.index)  # not replicated: this rank's rows are its own to read
            if owner == place.index:
                read += _read_rows(_open(handles, index[file_name]), file_name, param)
            if place.group is not None:
                broadcast_shards([_local(param)], place.group, owner)
    finally:
        handles.clear()
    return _total_read(read, model, directory)


def _total_read(read: int, model: nn.Module, directory: Path) -> WeightsRead:
    """This rank's bytes read and every rank's, summed over the job (on the parameters' device: NCCL reduces CUDA
    tensors)."""
    total = torch.tensor([read], dtype=torch.int64, device=_local(next(model.parameters())).device)
    if dist.is_initialized():
        dist.all_reduce(total)
    log.info(
        "pretrained weights: %s read from %s by this rank, %s by all ranks together",
        format_bytes(read), directory, format_bytes(int(total[0])),
    )  # fmt: skip
    return WeightsRead(read, int(total[0]))
