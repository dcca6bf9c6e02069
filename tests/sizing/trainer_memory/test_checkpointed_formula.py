"""What a checkpointed decoder layer keeps between its forward and its backward, against sizing/memory.py's formulas.

Inside a checkpointed region autograd saves no tensors itself (torch.utils.checkpoint's own saved-tensors hooks
store placeholders): a layer keeps its input and, under a selective policy, the outputs its policy marks MUST_SAVE.
So the bytes a checkpointed layer keeps are the memory its forward allocates and does not free, less its output,
plus its input. torch.profiler's memory profile counts every CPU allocation and free to the byte.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from sizing.memory import LORA_TARGETS, checkpointed_layer_bytes, lora_saved_bytes
from tests.sizing.trainer_memory.test_activation_formula import GQA, MHA, MISTRAL, QWEN2, QWEN3
from trainer.base.flags.config import LoraConfig
from trainer.base.model.presets import ModelShape
from trainer.base.model.source import ModelSource
from trainer.base.units import DTYPE_BYTES
from trainer.dtypes import TORCH_DTYPES
from trainer.model.build import build_meta_model, decoder_layers, hf_config, init_buffers, init_weights
from trainer.model.lora import apply_lora
from trainer.parallel.parallelize import apply_activation_checkpointing

BATCH, SEQ_LEN = 2, 64
CHECKPOINTED = ("full", "selective", "selective-mm")


def kept_bytes(shape: ModelShape, precision: str, mode: str, lora: LoraConfig | None = None) -> int:
    """Bytes layer 1 of the model keeps from its forward for its backward under checkpointing `mode`."""
    model: Any = build_meta_model(hf_config(ModelSource("preset", shape.name, shape)))  # an HF model: rotary_emb
    if lora is not None:
        apply_lora(model, lora, TORCH_DTYPES[precision])
    model.to_empty(device="cpu")
    init_buffers(model, torch.device("cpu"))
    init_weights(model, seed=0, std=0.02)
    model.to(TORCH_DTYPES[precision])
    apply_activation_checkpointing(model, mode)
    layer = decoder_layers(model)[1]
    hidden = torch.randn(BATCH, SEQ_LEN, shape.hidden_size, dtype=TORCH_DTYPES[precision], requires_grad=True)
    position_embeddings = model.model.rotary_emb(hidden, torch.arange(SEQ_LEN).unsqueeze(0))
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiled:
        output = layer(hidden, position_embeddings=position_embeddings)
    events = profiled.events()
    assert events is not None
    allocated = sum(event.self_cpu_memory_usage for event in events)  # frees count negative
    output = output[0] if isinstance(output, tuple) else output
    return allocated - output.untyped_storage().nbytes() + hidden.untyped_storage().nbytes()


@pytest.mark.parametrize("shape", [MHA, GQA, QWEN2, QWEN3, MISTRAL], ids=["mha", "gqa", "qwen2", "qwen3", "mistral"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("mode", CHECKPOINTED)
def test_a_checkpointed_layer_keeps_what_the_formula_says(shape: ModelShape, precision: str, mode: str) -> None:
    tokens = BATCH * SEQ_LEN
    assert kept_bytes(shape, precision, mode) == checkpointed_layer_bytes(shape, tokens, DTYPE_BYTES[precision], mode)


@pytest.mark.parametrize("mode", ["selective", "selective-mm"])
@pytest.mark.parametrize("targets", [LORA_TARGETS, ("q_proj", "v_proj"), ("k_proj", "up_proj")], ids=str)
def test_under_lora_the_selective_modes_recompute_the_adapters_and_keep_what_the_formula_says(
    targets: tuple[str, ...], mode: str
) -> None:
    """The adapters' narrow matmuls are recomputed (trainer/parallel/parallelize.py is_narrow_matmul): a layer with
    adapters keeps what it keeps without them, and peft's scaling factor (sizing/memory.py lora_saved_bytes)."""
    lora = LoraConfig(rank=4, targets=",".join(targets))
    tokens, e = BATCH * SEQ_LEN, DTYPE_BYTES["bf16"]
    without = checkpointed_layer_bytes(GQA, tokens, e, mode)
    assert kept_bytes(GQA, "bf16", mode, lora) == without + lora_saved_bytes(GQA, tokens, e, 4, targets, mode)
    assert lora_saved_bytes(GQA, tokens, e, 4, targets, mode) < tokens  # not a byte per token


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_selective_mm_keeps_less_than_selective_and_more_than_full(precision: str) -> None:
    """Every second matmul's output is recomputed instead of kept: measured, not taken from the formulas."""
    full, selective, every_other = (kept_bytes(GQA, precision, mode) for mode in ("full", "selective", "selective-mm"))
    assert full < every_other < selective
    # k, o and up are the recomputed ones: kv + h + I columns per token fewer.
    tokens, e = BATCH * SEQ_LEN, DTYPE_BYTES[precision]
    assert selective - every_other == tokens * e * (GQA.kv_width + GQA.hidden_size + GQA.intermediate_size)
