"""LoRA's model as the trainer builds it: the frozen base in the compute dtype without gradients or optimizer state,
fp32 adapters initialised as peft does, and an optimizer step that moves the adapters and nothing else."""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.nn.functional import cross_entropy

from trainer.base.flags.config import OptimConfig, parse_args
from trainer.base.model.source import resolve_model
from trainer.model.build import build_meta_model, hf_config, init_adapters, init_buffers, init_weights
from trainer.model.lora import apply_lora, is_adapter
from trainer.optim import build_optimizer
from trainer.parallel.parallelize import apply_fsdp, mixed_precision_policy


def local(param: torch.Tensor) -> torch.Tensor:
    return param.to_local() if isinstance(param, DTensor) else param


@pytest.mark.usefixtures("world_of_one")
def test_the_base_is_frozen_in_bf16_and_only_the_fp32_adapters_train() -> None:
    lora = parse_args(["--lora-rank", "4", "--lora-targets", "q_proj,down_proj"]).lora
    config = hf_config(resolve_model("tiny"))
    model = build_meta_model(config)
    apply_lora(model, lora, torch.bfloat16)
    apply_fsdp(model, init_device_mesh("cpu", (1,)), mixed_precision_policy("bf16"), True, tokens_per_rank=32)
    model.to_empty(device="cpu")
    init_buffers(model, torch.device("cpu"))
    init_weights(model, seed=3, std=config.initializer_range)
    init_adapters(model, seed=3)

    params = dict(model.named_parameters())
    adapters = {name: p for name, p in params.items() if is_adapter(name)}
    base = {name: p for name, p in params.items() if not is_adapter(name)}
    assert len(adapters) == 2 * 2 * config.num_hidden_layers  # A and B of q_proj and down_proj in each layer
    assert all(p.dtype == torch.float32 and p.requires_grad for p in adapters.values())
    assert all(p.dtype == torch.bfloat16 and not p.requires_grad for p in base.values())
    a, b = (local(params[f"model.layers.0.self_attn.q_proj.lora_{x}.default.weight"]) for x in "AB")
    assert torch.count_nonzero(b) == 0 and a.abs().max() <= 1 / math.sqrt(config.hidden_size)
    assert a.std() > 0.5 / math.sqrt(3 * config.hidden_size)  # uniform in +-1/sqrt(in): std 1/sqrt(3 in)

    optimizer = build_optimizer(model, OptimConfig(lr=1e-2))
    trained = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert trained == {id(p) for p in adapters.values()}

    before = {name: local(p).clone() for name, p in params.items()}
    tokens = torch.randint(0, 256, (2, 17))
    cross_entropy(model(input_ids=tokens[:, :-1]).logits.float().flatten(0, 1), tokens[:, 1:].flatten()).backward()
    assert all(p.grad is None for p in base.values())
    optimizer.step()
    assert all(torch.equal(local(p), before[name]) for name, p in base.items())
    assert all(not torch.equal(local(p), before[name]) for name, p in adapters.items() if ".lora_B." in name)
