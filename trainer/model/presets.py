"""Model shapes the project knows by name: the trainer builds models from them, the sizing math reads them.

Pure data, no torch import: `sizing.estimate` and the config validation use these shapes too.
Figures are the `config.json` values of the published checkpoints (meta-llama/Llama-2-*-hf).
"""

from __future__ import annotations

from dataclasses import dataclass

TORCH_FREE = True  # sizing/, the stack's checks and the policy pack read the model shapes


@dataclass(frozen=True)
class ModelShape:
    """The architecture numbers of a Llama-shaped decoder, as in a transformers `LlamaConfig`."""

    name: str
    hf_id: str | None  # hub id of the pretrained checkpoint; None for shapes built from config only
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    max_position_embeddings: int
    tie_word_embeddings: bool = False

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def num_parameters(self) -> int:
        """Exact parameter count of a LlamaForCausalLM of this shape (no biases, RMSNorm weights only)."""
        h, kv = self.hidden_size, self.num_kv_heads * self.head_dim
        attention = h * h * 2 + h * kv * 2  # q and o are h x h; k and v are h x kv (grouped-query attention)
        mlp = 3 * h * self.intermediate_size  # gate, up, down
        norms = 2 * h
        per_layer = attention + mlp + norms
        embeddings = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return self.num_layers * per_layer + embeddings + h  # + final norm


PRESETS: dict[str, ModelShape] = {
    # Small enough for several CPU processes on a 2-core machine; vocab matches the byte-level tokenizer.
    "tiny": ModelShape(
        name="tiny",
        hf_id=None,
        vocab_size=260,
        hidden_size=64,
        intermediate_size=176,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        max_position_embeddings=512,
    ),
    # A Llama-shaped model of about 100M parameters that still fits a CPU test machine.
    "small": ModelShape(
        name="small",
        hf_id=None,
        vocab_size=32000,
        hidden_size=768,
        intermediate_size=2048,
        num_layers=8,
        num_heads=12,
        num_kv_heads=12,
        max_position_embeddings=2048,
    ),
    "llama2-7b": ModelShape(
        name="llama2-7b",
        hf_id="meta-llama/Llama-2-7b-hf",
        vocab_size=32000,
        hidden_size=4096,
        intermediate_size=11008,
        num_layers=32,
        num_heads=32,
        num_kv_heads=32,
        max_position_embeddings=4096,
    ),
    "llama2-13b": ModelShape(
        name="llama2-13b",
        hf_id="meta-llama/Llama-2-13b-hf",
        vocab_size=32000,
        hidden_size=5120,
        intermediate_size=13824,
        num_layers=40,
        num_heads=40,
        num_kv_heads=40,
        max_position_embeddings=4096,
    ),
    "llama2-70b": ModelShape(
        name="llama2-70b",
        hf_id="meta-llama/Llama-2-70b-hf",
        vocab_size=32000,
        hidden_size=8192,
        intermediate_size=28672,
        num_layers=80,
        num_heads=64,
        num_kv_heads=8,
        max_position_embeddings=4096,
    ),
}


def find_shape(model: str) -> ModelShape | None:
    """The shape for a preset name or a known hub id (case-insensitive, with or without the -hf/-chat-hf suffix).

    Returns None for models the project does not know by name (a local directory, another hub id): the trainer
    then reads their config.json, and the sizing math asks for an explicit shape.
    """
    wanted = model.strip().lower()
    for shape in PRESETS.values():
        if wanted == shape.name:
            return shape
        if shape.hf_id and wanted in {shape.hf_id.lower(), shape.hf_id.lower().replace("-hf", "-chat-hf")}:
            return shape
    return None
