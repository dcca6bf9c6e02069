"""Where a model comes from and what shape it has, decided without torch (so validation runs before any work).

Four kinds: a preset (random init from trainer/base/model/presets.py), a local directory with config.json and
*.safetensors, a Hugging Face hub id (its config.json is fetched first; weights only when the model is built), or an
s3:// prefix holding such a directory (trainer/base/s3/inputs.py). An s3:// model is staged into --data-cache-dir before
the workers start; they resolve the same value to the staged directory offline, and before staging its config.json is
read from S3 for the shape. It is never a hub id, so never gated.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from trainer.base.errors import InputError
from trainer.base.model.presets import FAMILIES, PRESETS, ModelShape
from trainer.base.s3.inputs import FILES, read_manifest, staged, staged_directory
from trainer.base.s3.transfer import read_text
from trainer.base.s3.uri import S3Uri, is_s3_uri

BYTE_TOKENIZER = "byte"


@dataclass(frozen=True)
class ModelSource:
    kind: Literal["preset", "local", "hub", "s3"]
    name: str
    """The --model value as given."""
    shape: ModelShape
    directory: Path | None = None
    """Local directory holding config.json (and, for weights, *.safetensors); None for presets, hub models and an
    s3:// model not yet staged."""

    @property
    def pretrained(self) -> bool:
        return self.kind != "preset"

    def default_tokenizer(self) -> str:
        """The model's own tokenizer: its directory or hub id; the byte tokenizer for presets without a hub id."""
        if self.kind == "preset":
            return self.shape.hf_id or BYTE_TOKENIZER
        return str(self.directory) if self.directory is not None else self.name


def shape_from_hf_config(config: dict[str, Any], name: str) -> ModelShape:
    """A ModelShape from the config.json of a model of one of the families the trainer builds (FAMILIES: Llama,
    Mistral, Qwen2, Qwen3), as the hub publishes it (rope_theta and rope_scaling) or as transformers 5 saves it
    (rope_parameters: modeling_rope_utils.py convert_rope_params_to_dict). InputError for anything else."""
    model_type = config.get("model_type")
    if model_type not in FAMILIES:
        raise InputError(
            f"--model {name}: model_type {model_type!r} in its config.json is not one the trainer builds "
            f"({', '.join(FAMILIES)})"
        )
    if config.get("use_sliding_window"):  # Qwen2/Qwen3: a window on the layers past max_window_layers
        raise InputError(f"--model {name}: use_sliding_window is set; the trainer's attention is full causal")
    heads = int(config["num_attention_heads"])
    rope = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
    theta = float(rope.pop("rope_theta", config.get("rope_theta", 10000.0)))
    if "type" in rope:  # transformers' older spelling of rope_type
        rope.setdefault("rope_type", rope.pop("type"))
    if any(isinstance(value, dict) for value in rope.values()):
        raise InputError(f"--model {name}: RoPE parameters per layer type are not supported ({sorted(rope)})")
    scaling = tuple(sorted((key, tuple(v) if isinstance(v, list) else v) for key, v in rope.items()))
    # Qwen3Config's head_dim defaults to 128 whatever the width (configuration_qwen3.py), the others' to the width
    # over the heads (LlamaAttention: getattr(config, "head_dim", None) or hidden_size // num_attention_heads).
    head_dim = int(config.get("head_dim") or (128 if model_type == "qwen3" else int(config["hidden_size"]) // heads))
    try:
        return ModelShape(
            name=name,
            hf_id=None,
            vocab_size=int(config["vocab_size"]),
            hidden_size=int(config["hidden_size"]),
            intermediate_size=int(config["intermediate_size"]),
            num_layers=int(config["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(config.get("num_key_value_heads") or heads),
            max_position_embeddings=int(config["max_position_embeddings"]),
            tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
            model_type=model_type,
            explicit_head_dim=None if head_dim == int(config["hidden_size"]) // heads else head_dim,
            attention_bias=True if model_type == "qwen2" else bool(config.get("attention_bias", False)),
            mlp_bias=bool(config.get("mlp_bias", False)),
            rope_theta=theta,
            rope_scaling=() if scaling == (("rope_type", "default"),) else scaling,
            rms_norm_eps=float(config.get("rms_norm_eps", 1e-6)),
            sliding_window=config.get("sliding_window") if model_type == "mistral" else None,
        )
    except ValueError as error:  # the shape's own check: a feature its family cannot have
        raise InputError(f"--model {name}: {error}") from error


def looks_like_path(value: str) -> bool:
    """Hub ids are exactly 'owner/name'; anything else with a path shape is meant as a local path."""
    return is_s3_uri(value) or value.startswith((".", "/", "~")) or value.count("/") != 1


def s3_model(name: str, data_cache_dir: str | None, offline: bool) -> ModelSource:
    """An s3:// model: its staged directory when staging has run; else (staging itself, before it downloads) the
    shape from its config.json in S3, or, `offline` (the workers), an InputError saying it was not staged."""
    if offline or not data_cache_dir:
        _, directory = staged(name, "--model", data_cache_dir)
        return ModelSource("s3", name, _shape_in(directory, name), directory)
    uri = S3Uri.parse(name, "--model")
    if read_manifest(data_cache_dir, uri) is not None:
        directory = staged_directory(data_cache_dir, uri) / FILES
        return ModelSource("s3", name, _shape_in(directory, name), directory)
    config = json.loads(read_text(uri.join("config.json")))
    return ModelSource("s3", name, shape_from_hf_config(config, name))


def _shape_in(directory: Path, name: str) -> ModelShape:
    return shape_from_hf_config(json.loads((directory / "config.json").read_text()), name)


def resolve_model(name: str, data_cache_dir: str | None = None, *, offline: bool = False) -> ModelSource:
    """Resolve --model. Raises InputError with a message naming the value when it cannot be used. An s3:// model
    needs `data_cache_dir` (--data-cache-dir), where it is staged; `offline` (the workers): only as staged there."""
    if name in PRESETS:
        return ModelSource(kind="preset", name=name, shape=PRESETS[name])
    if is_s3_uri(name):
        return s3_model(name, data_cache_dir, offline)
    directory = Path(name).expanduser()
    if directory.is_dir():
        config_file = directory / "config.json"
        if not config_file.is_file():
            raise InputError(f"--model {name}: directory has no config.json")
        return ModelSource("local", name, shape_from_hf_config(json.loads(config_file.read_text()), name), directory)
    if looks_like_path(name):
        raise InputError(f"--model {name}: not a preset ({', '.join(PRESETS)}), an existing directory, or a hub id")
    from huggingface_hub import hf_hub_download  # torch-free; only needed for hub models

    try:
        config_file = Path(hf_hub_download(name, "config.json"))
    except Exception as error:  # any hub failure means the model cannot be used
        raise InputError(f"--model {name}: cannot fetch config.json from the Hugging Face hub ({error})") from error
    return ModelSource("hub", name, shape_from_hf_config(json.loads(config_file.read_text()), name), None)
