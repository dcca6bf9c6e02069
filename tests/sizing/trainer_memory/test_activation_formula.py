"""The activation formula of sizing/memory.py against what autograd really saves in the trainer's model.

Every tensor the forward pass saves for backward goes through a saved-tensors hook; counting each storage once
(and leaving out the parameters) gives the exact bytes a layer keeps. Small Llama shapes on CPU, so this is fast.
"""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional

from sizing.memory import FP32, Job, Ranks, layer_activation_bytes, memory_moments
from trainer.base.model.presets import ModelShape
from trainer.base.model.source import ModelSource
from trainer.dtypes import TORCH_DTYPES
from trainer.model.attention import document_inputs
from trainer.model.build import build_meta_model, decoder_layers, hf_config, init_buffers, init_weights

MHA = ModelShape("mha", None, 300, 128, 352, 2, 8, 8, 256)
GQA = ModelShape("gqa", None, 300, 128, 352, 2, 8, 2, 256)  # grouped-query attention, as Llama 2 70B
QWEN2 = ModelShape("qwen2", None, 300, 128, 352, 2, 8, 2, 256, model_type="qwen2", attention_bias=True)
# Qwen3: q/k norms, and a head_dim apart from hidden / heads (q is 256 wide in a 128-wide model).
QWEN3 = ModelShape("qwen3", None, 300, 128, 352, 2, 8, 2, 256, model_type="qwen3", explicit_head_dim=32)
MISTRAL = ModelShape("mistral", None, 300, 128, 352, 2, 8, 2, 256, model_type="mistral")


def saved_bytes_by_module(
    shape: ModelShape, precision: str, batch: int, seq_len: int, records_mask: bool = False
) -> dict[str, int]:
    """Bytes saved for backward by each decoder layer ('layer0', ...) and by the rest of the model ('root'); with
    `records_mask`, the forward the trainer runs on a CPU (one record per row: SDPA with the records' boolean mask),
    else one without a mask (is_causal), which saves what a GPU's flex attention saves."""
    model = build_meta_model(hf_config(ModelSource("preset", shape.name, shape)))
    model.to_empty(device="cpu")
    init_buffers(model, torch.device("cpu"))
    init_weights(model, seed=0, std=0.02)
    model.to(TORCH_DTYPES[precision])
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    where, seen = ["root"], {}
    for index, layer in enumerate(decoder_layers(model)):
        layer.register_forward_pre_hook(lambda *_, i=index: where.__setitem__(0, f"layer{i}"))
        layer.register_forward_hook(lambda *_: where.__setitem__(0, "root"))

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            seen.setdefault(storage.data_ptr(), (where[0], storage.nbytes()))
        return tensor

    ids = torch.randint(0, shape.vocab_size, (batch, seq_len))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        positions = torch.arange(seq_len).expand(batch, seq_len)
        logits = model(input_ids=ids, **(document_inputs(positions) if records_mask else {})).logits
        functional.cross_entropy(logits.float().flatten(0, 1), ids.flatten(), reduction="sum")  # as trainer/train.py
    totals: dict[str, int] = {}
    for module, nbytes in seen.values():
        totals[module] = totals.get(module, 0) + nbytes
    return totals


@pytest.mark.parametrize("shape", [MHA, GQA, QWEN2, QWEN3, MISTRAL], ids=["mha", "gqa", "qwen2", "qwen3", "mistral"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_layer_saves_what_the_formula_says(shape: ModelShape, precision: str) -> None:
    saved = saved_bytes_by_module(shape, precision, batch=2, seq_len=64)
    # Layer 1: layer 0 also holds RoPE's cos and sin, which every layer shares (counted once, below).
    compute_bytes = 2 if precision == "bf16" else 4
    assert saved["layer1"] == layer_activation_bytes(shape, tokens=2 * 64, compute_bytes=compute_bytes)


@pytest.mark.parametrize("shape", [GQA, QWEN3], ids=["gqa", "qwen3"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_whole_model_saves_layers_plus_shared_tensors_plus_log_probabilities(
    shape: ModelShape, precision: str
) -> None:
    batch, seq_len = 2, 64
    saved = sum(saved_bytes_by_module(shape, precision, batch, seq_len).values())
    job = Job(shape, seq_len, batch, mixed_precision=precision)
    loss_backward = memory_moments(job, Ranks(1, 1))[0]  # every layer's activations still saved (no mask: a GPU's)
    log_probabilities = FP32 * shape.vocab_size * batch * seq_len
    total_weight = FP32  # nll_loss also saves its one-element weight sum
    assert saved == loss_backward.terms["activations"] + log_probabilities + total_weight


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_on_a_cpu_each_layer_also_saves_the_records_mask_in_the_compute_dtype(precision: str) -> None:
    batch, seq_len = 2, 64
    saved = saved_bytes_by_module(GQA, precision, batch, seq_len, records_mask=True)
    compute_bytes = 2 if precision == "bf16" else 4
    mask = compute_bytes * batch * seq_len**2
    assert saved["layer1"] == layer_activation_bytes(GQA, tokens=batch * seq_len, compute_bytes=compute_bytes) + mask
    cpu, gpu = (memory_moments(Job(GQA, seq_len, batch, mixed_precision=precision), Ranks(1, 1, device))[0]
                for device in ("cpu", "gpu"))  # fmt: skip
    assert cpu.terms["activations"] - gpu.terms["activations"] == GQA.num_layers * mask
