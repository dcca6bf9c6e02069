"""Model creation: meta device, to_empty, then every parameter and buffer really initialised from the seed."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.base.model.source import resolve_model
from trainer.model.build import build_meta_model, hf_config, init_buffers, init_weights


def initialised_tiny(seed: int) -> torch.nn.Module:
    config = hf_config(resolve_model("tiny"))
    model = build_meta_model(config)
    model.to_empty(device="cpu")
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            tensor.fill_(math.nan)  # whatever init_* leaves untouched stays NaN
    init_buffers(model, torch.device("cpu"))
    init_weights(model, seed, std=config.initializer_range)
    return model


def test_every_parameter_and_buffer_is_written() -> None:
    model = initialised_tiny(seed=0)
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        assert torch.isfinite(tensor).all(), name


def test_rotary_frequencies_match_an_eagerly_built_model() -> None:
    from transformers import LlamaForCausalLM

    model = initialised_tiny(seed=0)
    eager = LlamaForCausalLM(hf_config(resolve_model("tiny")))
    for (name, ours), (_, theirs) in zip(model.named_buffers(), eager.named_buffers(), strict=True):
        assert torch.equal(ours, theirs), name


def test_weights_follow_the_seed() -> None:
    first, again, other = initialised_tiny(0), initialised_tiny(0), initialised_tiny(1)
    for (name, a), b, c in zip(first.named_parameters(), again.parameters(), other.parameters(), strict=True):
        assert torch.equal(a, b), name
        if not name.endswith("norm.weight"):
            assert not torch.equal(a, c), name


def test_matrices_are_normal_and_norms_are_ones() -> None:
    model = initialised_tiny(seed=0)
    for name, param in model.named_parameters():
        if name.endswith("norm.weight"):
            assert torch.equal(param, torch.ones_like(param)), name
        else:
            assert param.std().item() == pytest.approx(0.02, rel=0.15), name
            assert abs(param.mean().item()) < 0.005, name


def test_a_buffer_without_an_initialiser_is_an_error() -> None:
    model = initialised_tiny(seed=0)
    model.register_buffer("mystery", torch.empty(3), persistent=False)
    with pytest.raises(RuntimeError, match="mystery"):
        init_buffers(model, torch.device("cpu"))
