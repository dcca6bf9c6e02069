"""Master weights and optimizer state are fp32 whatever dtype a checkpoint's config names: a model whose config.json
says float16 (as Llama 2's do) or bfloat16 (as the trainer's own exports do) trains exactly like its fp32 copy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.harness.trainer_runs import TINY, TrainerRun, run_trainer, with_flags
from trainer.base.model.source import resolve_model
from trainer.model.build import build_meta_model, hf_config

STEPS = 4


def save_llama(directory: Path, dtype: torch.dtype, state: dict[str, torch.Tensor] | None = None) -> Path:
    """A small Llama in HF format stored in `dtype` (config.json's dtype says so too), optionally with given weights."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(123)
    config = LlamaConfig(
        vocab_size=300, hidden_size=48, intermediate_size=136, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128,
    )  # fmt: skip
    model = LlamaForCausalLM(config)
    if state is not None:
        model.load_state_dict(state)
    # transformers wraps PreTrainedModel.to in a decorator whose type drops the bound self.
    model.to(dtype)  # pyright: ignore[reportArgumentType]
    model.config.dtype = dtype
    model.save_pretrained(directory)
    return directory


def stored_weights(directory: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    weights: dict[str, torch.Tensor] = {}
    for file in sorted(directory.glob("*.safetensors")):
        weights.update(load_file(file))
    return weights


def train(model_dir: Path, workdir: Path, *extra: str) -> TrainerRun:
    args = with_flags(TINY, model=str(model_dir), tokenizer="byte", steps=str(STEPS), warmup_steps="1")
    run = run_trainer([*args, *extra], workdir)
    assert run.returncode == 0, run.output
    return run


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_the_model_is_built_in_fp32_whatever_its_config_says(dtype: torch.dtype, tmp_path: Path) -> None:
    directory = tmp_path / "model"
    directory.mkdir()
    config = {"model_type": "llama", "vocab_size": 300, "hidden_size": 48, "intermediate_size": 136,
              "num_hidden_layers": 1, "num_attention_heads": 4, "max_position_embeddings": 128,
              "dtype": str(dtype).removeprefix("torch.")}  # fmt: skip
    (directory / "config.json").write_text(json.dumps(config))
    model = build_meta_model(hf_config(resolve_model(str(directory))))
    assert {p.dtype for p in model.parameters()} == {torch.float32}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_an_fp16_config_trains_finite_and_like_its_fp32_copy(tmp_path: Path) -> None:
    """The fp16 checkpoint's weights, upcast exactly, are the fp32 copy: every step's loss must be bit-identical."""
    fp16 = save_llama(tmp_path / "fp16", torch.float16)
    fp32 = save_llama(tmp_path / "fp32", torch.float32, state=stored_weights(fp16))
    assert json.loads((fp16 / "config.json").read_text())["dtype"] == "float16"
    from_fp16 = train(fp16, tmp_path, "--mixed-precision", "bf16")
    from_fp32 = train(fp32, tmp_path, "--mixed-precision", "bf16")
    losses = from_fp16.losses()
    assert sorted(losses) == list(range(1, STEPS + 1))
    assert all(torch.isfinite(torch.tensor(loss)) for loss in losses.values()), losses
    assert losses == from_fp32.losses()
    assert losses[STEPS] < losses[1]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_trainers_own_bf16_export_trains_like_its_fp32_copy(tmp_path: Path) -> None:
    source = save_llama(tmp_path / "source", torch.float32)
    exported = tmp_path / "exported"
    train(source, tmp_path, "--export-hf", str(exported), "--export-dtype", "bf16")
    assert json.loads((exported / "config.json").read_text())["dtype"] == "bfloat16"
    copy = save_llama(tmp_path / "copy", torch.float32, state=stored_weights(exported))
    from_export = train(exported, tmp_path)
    assert all(torch.isfinite(torch.tensor(loss)) for loss in from_export.losses().values())
    assert from_export.losses() == train(copy, tmp_path).losses()
