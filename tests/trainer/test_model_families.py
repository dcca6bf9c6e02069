"""Today's model families (Llama 3.x, Qwen2.5, Qwen3, Mistral): the presets' shapes count exactly what transformers
builds from the same config and what the checkpoints publish, config.json files read back into the same shapes, and
the trainer builds, loads (sharded safetensors) and trains a tiny model of each family, the same on 1 and 2 ranks,
through a kill and a resume."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from sizing.memory import layer_parameter_shapes, numel, root_parameter_shapes
from tests.harness.trainer_runs import TINY, assert_same_losses, run_trainer, with_flags
from trainer.base.errors import InputError
from trainer.base.flags.config import DataConfig
from trainer.base.model.presets import PRESETS, find_shape
from trainer.base.model.source import resolve_model, shape_from_hf_config
from trainer.data.packing import IGNORE_INDEX, SampleOrder, build_packed_data, step_batch
from trainer.data.tokenizer_bytes import ByteTokenizer
from trainer.model.build import build_meta_model, hf_config

# The published parameter counts: each checkpoint's model.safetensors.index.json total_size (bf16 bytes) / 2, or the
# single model.safetensors' tensors (Llama 3.2 1B); the figures are also in trainer/base/model/presets.py's comments.
PUBLISHED = {
    "llama3.1-8b": ("LlamaForCausalLM", 8_030_261_248),
    "llama3.1-70b": ("LlamaForCausalLM", 70_553_706_496),
    "llama3.2-1b": ("LlamaForCausalLM", 1_235_814_400),
    "llama3.2-3b": ("LlamaForCausalLM", 3_212_749_824),
    "qwen2.5-7b": ("Qwen2ForCausalLM", 7_615_616_512),
    "qwen3-8b": ("Qwen3ForCausalLM", 8_190_735_360),
    "mistral-7b-v0.3": ("MistralForCausalLM", 7_248_023_552),
}


@pytest.mark.parametrize("name", PUBLISHED)
def test_the_count_is_transformers_own_and_the_published_one(name: str) -> None:
    """The full-size model on the meta device (no memory): its class, every parameter, each decoder layer, and the
    memory model's parameter layout."""
    shape = PRESETS[name]
    model = build_meta_model(hf_config(resolve_model(name)))
    model_class, published = PUBLISHED[name]
    assert type(model).__name__ == model_class
    assert sum(p.numel() for p in model.parameters()) == shape.num_parameters == published
    layer = model.get_submodule("model.layers.0")
    assert sum(p.numel() for p in layer.parameters()) == shape.layer_parameters == numel(layer_parameter_shapes(shape))
    assert shape.num_layers * shape.layer_parameters + numel(root_parameter_shapes(shape)) == published


def test_each_feature_is_in_the_model_it_names() -> None:
    """The features behind the counts, looked up in the built models rather than trusted to the shape."""

    def names(preset: str) -> set[str]:
        model = build_meta_model(hf_config(resolve_model(preset)))
        return {name.removeprefix("model.layers.0.") for name, _ in model.named_parameters() if ".layers.0." in name}

    assert {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"} <= names("qwen2.5-7b")
    assert "self_attn.o_proj.bias" not in names("qwen2.5-7b")
    assert {"self_attn.q_norm.weight", "self_attn.k_norm.weight"} <= names("qwen3-8b")
    assert not any(name.endswith(".bias") for name in names("llama3.1-8b") | names("mistral-7b-v0.3"))
    tied = build_meta_model(hf_config(resolve_model("llama3.2-1b")))
    assert tied.get_submodule("lm_head").weight is tied.get_submodule("model.embed_tokens").weight
    config = hf_config(resolve_model("llama3.1-8b"))
    assert config.rope_parameters == {
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
    }  # fmt: skip
    assert hf_config(resolve_model("mistral-7b-v0.3")).sliding_window is None  # MistralConfig's default is 4096


def hub_style(config: dict[str, Any]) -> dict[str, Any]:
    """A transformers 5 config dict written as the hub's config.json files are: rope_theta and rope_scaling."""
    hub = dict(config)
    rope = dict(hub.pop("rope_parameters"))
    hub["rope_theta"] = rope.pop("rope_theta")
    hub["rope_scaling"] = None if rope == {"rope_type": "default"} else rope
    return hub


@pytest.mark.parametrize("name", PRESETS)
def test_config_json_reads_back_into_the_same_shape(name: str) -> None:
    shape = PRESETS[name]
    written = json.loads(hf_config(resolve_model(name)).to_json_string())
    for config in (written, hub_style(written)):
        assert replace(shape_from_hf_config(config, name), hf_id=shape.hf_id) == shape


def test_other_model_types_are_refused_by_name() -> None:
    config = json.loads(hf_config(resolve_model("tiny")).to_json_string()) | {"model_type": "gpt2"}
    with pytest.raises(InputError, match=r"--model other: model_type 'gpt2' .* \(llama, mistral, qwen2, qwen3\)"):
        shape_from_hf_config(config, "other")
    with pytest.raises(InputError, match="use_sliding_window"):
        shape_from_hf_config({**config, "model_type": "qwen2", "use_sliding_window": True}, "other")


def test_presets_are_found_by_name_hub_id_and_instruct_id() -> None:
    assert find_shape("qwen3-8b") is PRESETS["qwen3-8b"]
    assert find_shape("Qwen/Qwen2.5-7B") is PRESETS["qwen2.5-7b"]
    assert find_shape("meta-llama/Llama-3.1-8B-Instruct") is PRESETS["llama3.1-8b"]
    assert find_shape("meta-llama/Llama-3.3-70B-Instruct") is PRESETS["llama3.1-70b"]
    assert find_shape("mistralai/mistral-7b-instruct-v0.3") is PRESETS["mistral-7b-v0.3"]
    assert find_shape("meta-llama/Llama-2-7b-chat-hf") is PRESETS["llama2-7b"]
    assert find_shape("Qwen/Qwen2.5-7B-Instruct") is None  # its max_position_embeddings differ: not the same shape


# Tiny models of each family (a few layers, vocab 300 for the byte tokenizer), each with what its family adds.
SMALL = {"vocab_size": 300, "hidden_size": 48, "intermediate_size": 136, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128}  # fmt: skip
LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 32}  # fmt: skip
FAMILIES = {
    "llama": {**SMALL, "tie_word_embeddings": True, "rope_parameters": LLAMA3_ROPE},  # as Llama 3.2
    "qwen2": {**SMALL, "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}},  # q/k/v biases
    "qwen3": {**SMALL, "head_dim": 16},  # q/k norms; head_dim 16, not 48 / 4
    "mistral": {**SMALL, "sliding_window": None},
}
SEQ_LEN, GLOBAL_BATCH, SEED = 32, 8, 7


def random_tiny(model_type: str, seed: int) -> Any:
    """The family's tiny model in transformers, every parameter random (biases and norm weights moved off their
    initial values too, so that loading each one shows)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **FAMILIES[model_type]))
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() == 1:
                param.add_(0.1 * torch.randn_like(param))
    return model


def save_tiny(model_type: str, directory: Path) -> Path:
    """The family's tiny random model in HF format, in several safetensors files with an index."""
    random_tiny(model_type, seed=123).save_pretrained(directory, max_shard_size="100KB")
    return directory


def loss_of_step_1(directory: Path) -> float:
    """Step 1's global batch loss of the saved model, loaded by transformers itself in one process."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32)
    data = build_packed_data(DataConfig(dataset="synthetic", seq_len=SEQ_LEN), ByteTokenizer())
    batch = step_batch(data, SampleOrder(data.num_samples, SEED), 0, GLOBAL_BATCH, GLOBAL_BATCH, 0, 1)
    ((inputs, labels, positions),) = batch.micro_batches
    with torch.no_grad():  # transformers finds the packed records from the positions (find_packed_sequence_indices)
        logits = model(
            input_ids=torch.from_numpy(inputs), position_ids=torch.from_numpy(positions), use_cache=False
        ).logits
    loss = torch.nn.functional.cross_entropy(
        logits.flatten(0, 1), torch.from_numpy(labels).flatten(), ignore_index=IGNORE_INDEX
    )
    return float(loss)


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("model_type", FAMILIES)
def test_each_family_loads_and_trains_alike_on_1_and_2_ranks_through_a_resume(model_type: str, tmp_path: Path) -> None:
    """One plain process, uninterrupted, against two ranks killed after step 2 (checkpoint at 2) and restarted by
    torchrun: the same loss at every step, and step 1's is that of transformers' own loading of the files."""
    directory = save_tiny(model_type, tmp_path / "model")
    assert (directory / "model.safetensors.index.json").is_file() and len(list(directory.glob("*.safetensors"))) > 2
    args = with_flags(TINY, model=str(directory), tokenizer="byte", steps="4", warmup_steps="1")
    reference = run_trainer(args, tmp_path)
    assert reference.returncode == 0, reference.output
    resumable = with_flags(args, checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every="2")
    run = run_trainer(resumable, tmp_path, nproc=2, fault="kill_after_step:3", max_restarts=1)
    assert run.returncode == 0, run.output
    assert [(r["step"], r["restarts"]) for r in run.metrics] == [(1, 0), (2, 0), (3, 0), (3, 1), (4, 1)]
    assert {r["world_size"] for r in run.metrics} == {2}
    assert_same_losses(run.losses(), reference.losses())
    assert reference.losses()[1] == pytest.approx(loss_of_step_1(directory), rel=1e-5)
