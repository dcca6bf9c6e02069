"""Where a model comes from and what shape it has, decided without torch (so validation runs before any work).

Three kinds: a preset (random init from trainer/model/presets.py), a local directory with config.json and
*.safetensors, or a Hugging Face hub id (its config.json is fetched first; weights only when the model is built).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from trainer.errors import InputError
from trainer.model.presets import PRESETS, ModelShape

TORCH_FREE = True  # the stack's gated-model check tells a local path from a hub id with it

BYTE_TOKENIZER = "byte"


@dataclass(frozen=True)
class ModelSource:
    kind: Literal["preset", "local", "hub"]
    name: str
    """The --model value as given."""
    shape: ModelShape
    directory: Path | None = None
    """Local directory holding config.json (and, for weights, *.safetensors); None for presets."""

    @property
    def pretrained(self) -> bool:
        return self.kind != "preset"

    def default_tokenizer(self) -> str:
        """The model's own tokenizer: its directory or hub id; the byte tokenizer for presets without a hub id."""
        if self.kind == "preset":
            return self.shape.hf_id or BYTE_TOKENIZER
        return str(self.directory) if self.kind == "local" else self.name


def shape_from_hf_config(config: dict[str, Any], name: str) -> ModelShape:
    """A ModelShape from a transformers config.json of a Llama-shaped decoder."""
    heads = int(config["num_attention_heads"])
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
    )


def looks_like_path(value: str) -> bool:
    """Hub ids are exactly 'owner/name'; anything else with a path shape is meant as a local path."""
    return value.startswith((".", "/", "~")) or value.count("/") != 1


def resolve_model(name: str) -> ModelSource:
    """Resolve --model. Raises ValueError with a message naming the value when it cannot be used."""
    if name in PRESETS:
        return ModelSource(kind="preset", name=name, shape=PRESETS[name])
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
