"""The export generates as a served model should: the cache on (each new token is one token's forward, not the whole
prefix again), the base model's generation_config.json carried over, or a default with the trained end-of-text id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.trainer.test_validation_loss import trainer_model
from trainer.base.model.source import resolve_model
from trainer.base.pod.env import DistEnv
from trainer.checkpoint.export import GENERATION_CONFIG, export_hf, generation_config
from trainer.data.tokenizer_bytes import BOS_ID, EOS_ID, ByteTokenizer
from trainer.model.build import hf_config

PROMPT, NEW_TOKENS = 6, 8


@pytest.fixture
def exported(tmp_path: Path, world_of_one: None) -> Path:
    """The tiny preset as the trainer builds it, exported in fp32 as the trainer exports it."""
    model, config = trainer_model(), hf_config(resolve_model("tiny"))
    tokenizer = ByteTokenizer()
    export_hf(model, config, str(tmp_path), "fp32", DistEnv(), tokenizer, generation=None)
    return tmp_path


def tokens_per_forward(directory: Path) -> list[int]:
    """Greedy generate() on the export loaded by transformers: the tokens each forward of the model processed."""
    from transformers import AutoModelForCausalLM

    model: Any = AutoModelForCausalLM.from_pretrained(directory).eval()  # a LlamaForCausalLM: it has generate()
    seen: list[int] = []
    model.model.register_forward_pre_hook(lambda _, args, kwargs: seen.append(kwargs["input_ids"].shape[1]),
                                           with_kwargs=True)  # fmt: skip
    prompt = torch.arange(10, 10 + PROMPT)[None]
    with torch.no_grad():
        out = model.generate(prompt, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False)
    assert out.shape[1] == PROMPT + NEW_TOKENS
    return seen


def test_generate_on_the_export_processes_one_token_per_new_token(exported: Path) -> None:
    config = json.loads((exported / "config.json").read_text())
    assert config["use_cache"] is True
    assert "fsdp_eks" not in json.dumps(config)  # transformers' own attention when served, not the trainer's
    assert tokens_per_forward(exported) == [PROMPT] + [1] * (NEW_TOKENS - 1)  # without the cache: 6, 7, ..., 13


def test_a_preset_exports_a_default_generation_config_with_its_trained_ids(exported: Path) -> None:
    generation = json.loads((exported / GENERATION_CONFIG).read_text())
    assert (generation["bos_token_id"], generation["eos_token_id"]) == (BOS_ID, EOS_ID)
    assert generation.get("use_cache", True) is True


def test_the_base_models_generation_config_is_carried_over(tmp_path: Path) -> None:
    base = {
        "bos_token_id": 128000,
        "eos_token_id": [128001, 128008, 128009],
        "do_sample": True,
        "temperature": 0.6,
        "top_p": 0.9,
    }  # fmt: skip  (Llama 3.1 Instruct's generation_config.json)
    (tmp_path / GENERATION_CONFIG).write_text(json.dumps(base))
    generation = generation_config(hf_config(resolve_model("tiny")), tmp_path, ByteTokenizer())
    generation.save_pretrained(str(tmp_path / "export"))
    written = json.loads((tmp_path / "export" / GENERATION_CONFIG).read_text())
    assert {key: written[key] for key in base} == base
    assert written.get("use_cache", True) is True
