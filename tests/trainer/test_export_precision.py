"""The merged LoRA export's precision (docs/trainer.md, LoRA: Export): in bf16 an update smaller than half a unit in
the last place of its weight rounds away; --export-dtype fp32 keeps W + (alpha / r) B A exactly as computed."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from torch.distributed.tensor import DTensor

from tests.trainer.test_validation_loss import trainer_model
from trainer.base.flags.config import LoraConfig
from trainer.base.model.source import resolve_model
from trainer.base.pod.env import DistEnv
from trainer.checkpoint.export import export_hf
from trainer.data.tokenizer_bytes import ByteTokenizer
from trainer.model.build import hf_config
from trainer.model.lora import merges

WEIGHT = "model.layers.0.self_attn.q_proj.weight"


def full(param: torch.Tensor) -> torch.Tensor:
    return param.full_tensor() if isinstance(param, DTensor) else param


@pytest.mark.usefixtures("world_of_one")
def test_a_small_update_rounds_away_in_a_bf16_merge_and_stays_in_fp32(tmp_path: Path) -> None:
    model = trainer_model("--lora-rank", "4", "--mixed-precision", "fp32", "--lora-targets", "q_proj")
    lora = LoraConfig(rank=4, targets="q_proj")
    adapted = merges(model)
    base = next(param for param in model.parameters() if id(param) in adapted)  # layer 0's q_proj
    a, b, scaling = adapted[id(base)]
    with torch.no_grad():
        (b.to_local() if isinstance(b, DTensor) else b).fill_(1e-6)  # an update far below bf16's resolution
    config = hf_config(resolve_model("tiny"))
    for dtype in ("bf16", "fp32"):
        export_hf(model, config, str(tmp_path / dtype), dtype, DistEnv(), ByteTokenizer(), lora)
    weight, update = full(base).detach().float(), scaling * (full(b).float() @ full(a).float())
    assert update.abs().max() > 0
    exact = load_file(tmp_path / "fp32" / "model.safetensors")[WEIGHT]
    rounded = load_file(tmp_path / "bf16" / "model.safetensors")[WEIGHT]
    merged = weight + update
    assert torch.equal(exact, merged)  # fp32: the merge as computed
    # bf16 keeps 8 significant bits: each value within half a unit in the last place (at most 2^-8 relative) ...
    assert ((rounded.float() - merged).abs() <= merged.abs() * 2**-8).all()
    # ... which an update of about 1e-6 is far below: most weights export as the base's own bf16 value.
    lost = float((rounded == weight.to(torch.bfloat16)).float().mean())
    assert lost > 0.9, lost  # 96% here
