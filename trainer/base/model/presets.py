"""Model shapes the project knows by name: the trainer builds models from them, the sizing math reads them.

Pure data, no torch import: `sizing.estimate` and the config validation use these shapes too.
Figures are the `config.json` values of the published checkpoints (each preset names its hub id). Every preset's
`num_parameters` equals the parameter count of transformers' own model built from the same config on the meta
device, and the published count (tests/trainer/test_model_families.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

RopeValue = float | int | str | tuple[float, ...]


@dataclass(frozen=True)
class Family:
    """What a transformers model_type fixes and what its config chooses (transformers/models/<type>/modeling_*.py,
    the Attention and MLP classes' nn.Linear(bias=...) and RMSNorm members, transformers 5.24)."""

    model_type: str
    qkv_bias: bool | None
    """q/k/v projection biases: True/False when the architecture fixes them (Qwen2Attention: bias=True on q, k, v,
    none on o), None when `attention_bias` in the config turns them on with o's (Llama, Qwen3)."""
    o_bias_follows_qkv: bool
    """`attention_bias` puts a bias on o_proj too (LlamaAttention, Qwen3Attention)."""
    mlp_bias: bool
    """The config's `mlp_bias` can put biases on gate/up/down (LlamaMLP only)."""
    qk_norm: bool
    """An RMSNorm over each head's q and k after projection (Qwen3Attention.q_norm/k_norm, weight of head_dim)."""


FAMILIES: dict[str, Family] = {
    "llama": Family("llama", qkv_bias=None, o_bias_follows_qkv=True, mlp_bias=True, qk_norm=False),
    "mistral": Family("mistral", qkv_bias=False, o_bias_follows_qkv=False, mlp_bias=False, qk_norm=False),
    "qwen2": Family("qwen2", qkv_bias=True, o_bias_follows_qkv=False, mlp_bias=False, qk_norm=False),
    "qwen3": Family("qwen3", qkv_bias=None, o_bias_follows_qkv=True, mlp_bias=False, qk_norm=True),
}


def llama3_rope(factor: float) -> tuple[tuple[str, RopeValue], ...]:
    """Llama 3.1+'s RoPE scaling (config.json `rope_scaling`, rope_type llama3): only the factor differs between
    the 3.1 (8.0) and 3.2 (32.0) checkpoints."""
    return (
        ("factor", factor),
        ("high_freq_factor", 4.0),
        ("low_freq_factor", 1.0),
        ("original_max_position_embeddings", 8192),
        ("rope_type", "llama3"),
    )


@dataclass(frozen=True)
class ModelShape:
    """The architecture numbers of a Llama-shaped decoder (Llama, Mistral, Qwen2, Qwen3), as in its config.json."""

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
    model_type: str = "llama"
    """The transformers model_type (a key of FAMILIES): which config and model class build it."""
    explicit_head_dim: int | None = None
    """config.json's `head_dim` where it differs from hidden_size / num_heads (it may in Qwen3); None where not."""
    attention_bias: bool = False
    """Biases on q, k, v (and on o where the family's `attention_bias` does that): Qwen2 always, others by config."""
    mlp_bias: bool = False
    rope_theta: float = 10000.0
    rope_scaling: tuple[tuple[str, RopeValue], ...] = ()
    """config.json's `rope_scaling` as sorted (key, value) pairs (rope_type among them); () for plain RoPE. No
    parameters, but a preset's config must reproduce the checkpoint's positions."""
    rms_norm_eps: float = 1e-6
    sliding_window: int | None = None
    """Mistral's attention window (None: full causal attention, as from v0.2 on)."""
    aliases: tuple[str, ...] = field(default=(), compare=False)
    """Other hub ids with this very shape (the -Instruct and chat checkpoints), for find_shape."""

    def __post_init__(self) -> None:
        family = FAMILIES.get(self.model_type)
        if family is None:
            raise ValueError(f"{self.name}: model_type {self.model_type!r} is not one of {', '.join(FAMILIES)}")
        if family.qkv_bias is not None and self.attention_bias != family.qkv_bias:
            raise ValueError(f"{self.name}: {self.model_type} has attention_bias={family.qkv_bias} by architecture")
        if self.mlp_bias and not family.mlp_bias:
            raise ValueError(f"{self.name}: {self.model_type} has no MLP biases")
        if self.explicit_head_dim == self.hidden_size // self.num_heads:
            raise ValueError(f"{self.name}: explicit_head_dim only where it differs from hidden_size / num_heads")
        if self.sliding_window is not None and self.model_type != "mistral":
            raise ValueError(f"{self.name}: a sliding window is modelled for mistral only")

    @property
    def family(self) -> Family:
        return FAMILIES[self.model_type]

    @property
    def head_dim(self) -> int:
        return self.explicit_head_dim or self.hidden_size // self.num_heads

    @property
    def q_width(self) -> int:
        """Output width of q_proj (input width of o_proj): num_heads x head_dim, not always hidden_size (Qwen3)."""
        return self.num_heads * self.head_dim

    @property
    def kv_width(self) -> int:
        """Output width of k_proj and v_proj (grouped-query attention: fewer kv heads than q heads)."""
        return self.num_kv_heads * self.head_dim

    @property
    def o_bias(self) -> bool:
        return self.attention_bias and self.family.o_bias_follows_qkv

    @property
    def qk_norm(self) -> bool:
        return self.family.qk_norm

    @property
    def rope_parameters(self) -> dict[str, RopeValue]:
        """transformers 5's `rope_parameters` (modeling_rope_utils.py RotaryEmbeddingConfigMixin): config.json's
        rope_theta and rope_scaling in one dict."""
        return {"rope_type": "default", **dict(self.rope_scaling), "rope_theta": self.rope_theta}

    @property
    def layer_parameters(self) -> int:
        """Parameters of one decoder layer."""
        h, q, kv, i = self.hidden_size, self.q_width, self.kv_width, self.intermediate_size
        attention = h * q + 2 * h * kv + q * h  # q, k, v, o
        attention += (q + 2 * kv) * self.attention_bias + h * self.o_bias
        attention += 2 * self.head_dim * self.qk_norm  # q_norm and k_norm: one weight of head_dim each
        mlp = 3 * h * i + (2 * i + h) * self.mlp_bias  # gate, up, down
        return attention + mlp + 2 * h  # + input and post-attention RMSNorm weights

    @property
    def num_parameters(self) -> int:
        """Exact parameter count of the transformers model of this shape (tests/trainer/test_model_families.py)."""
        embeddings = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)
        return self.num_layers * self.layer_parameters + embeddings + self.hidden_size  # + final norm

    def config_kwargs(self) -> dict[str, object]:
        """Keyword arguments of the family's transformers config class (AutoConfig.for_model(model_type, ...))
        that reproduce the checkpoint's config.json."""
        kwargs: dict[str, object] = {
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "num_key_value_heads": self.num_kv_heads,
            "max_position_embeddings": self.max_position_embeddings,
            "tie_word_embeddings": self.tie_word_embeddings,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_parameters": self.rope_parameters,
        }
        # Qwen3Config's head_dim defaults to 128, not hidden / heads: always say it there.
        if self.explicit_head_dim is not None or self.model_type == "qwen3":
            kwargs["head_dim"] = self.head_dim
        if self.family.qkv_bias is None:
            kwargs["attention_bias"] = self.attention_bias
        if self.model_type == "llama":
            kwargs["mlp_bias"] = self.mlp_bias
        if self.model_type == "mistral":  # MistralConfig's sliding_window defaults to 4096, v0.3's is null
            kwargs["sliding_window"] = self.sliding_window
        if self.model_type in ("qwen2", "qwen3"):
            kwargs["use_sliding_window"] = False
        return kwargs


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
        rms_norm_eps=1e-5,
        aliases=("meta-llama/Llama-2-7b-chat-hf",),
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
        rms_norm_eps=1e-5,
        aliases=("meta-llama/Llama-2-13b-chat-hf",),
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
        rms_norm_eps=1e-5,
        aliases=("meta-llama/Llama-2-70b-chat-hf",),
    ),
    # Published: 8,030,261,248 parameters (model.safetensors.index.json total_size 16,060,522,496 bytes in bf16).
    "llama3.1-8b": ModelShape(
        name="llama3.1-8b",
        hf_id="meta-llama/Llama-3.1-8B",
        vocab_size=128256,
        hidden_size=4096,
        intermediate_size=14336,
        num_layers=32,
        num_heads=32,
        num_kv_heads=8,
        max_position_embeddings=131072,
        rope_theta=500000.0,
        rope_scaling=llama3_rope(8.0),
        rms_norm_eps=1e-5,
        aliases=("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3.1-8B"),
    ),
    # Published: 70,553,706,496 parameters (index total_size 141,107,412,992 bytes in bf16). Llama 3.3 70B Instruct
    # has the same config.json.
    "llama3.1-70b": ModelShape(
        name="llama3.1-70b",
        hf_id="meta-llama/Llama-3.1-70B",
        vocab_size=128256,
        hidden_size=8192,
        intermediate_size=28672,
        num_layers=80,
        num_heads=64,
        num_kv_heads=8,
        max_position_embeddings=131072,
        rope_theta=500000.0,
        rope_scaling=llama3_rope(8.0),
        rms_norm_eps=1e-5,
        aliases=(
            "meta-llama/Llama-3.1-70B-Instruct",
            "meta-llama/Meta-Llama-3.1-70B",
            "meta-llama/Llama-3.3-70B-Instruct",
        ),
    ),
    # Published: 1,235,814,400 parameters (model.safetensors, 2,471,628,800 bytes in bf16; the output layer is the
    # embedding).
    "llama3.2-1b": ModelShape(
        name="llama3.2-1b",
        hf_id="meta-llama/Llama-3.2-1B",
        vocab_size=128256,
        hidden_size=2048,
        intermediate_size=8192,
        num_layers=16,
        num_heads=32,
        num_kv_heads=8,
        max_position_embeddings=131072,
        tie_word_embeddings=True,
        rope_theta=500000.0,
        rope_scaling=llama3_rope(32.0),
        rms_norm_eps=1e-5,
        aliases=("meta-llama/Llama-3.2-1B-Instruct",),
    ),
    # Published: 3,212,749,824 parameters (index total_size 6,425,499,648 bytes in bf16).
    "llama3.2-3b": ModelShape(
        name="llama3.2-3b",
        hf_id="meta-llama/Llama-3.2-3B",
        vocab_size=128256,
        hidden_size=3072,
        intermediate_size=8192,
        num_layers=28,
        num_heads=24,
        num_kv_heads=8,
        max_position_embeddings=131072,
        tie_word_embeddings=True,
        rope_theta=500000.0,
        rope_scaling=llama3_rope(32.0),
        rms_norm_eps=1e-5,
        aliases=("meta-llama/Llama-3.2-3B-Instruct",),
    ),
    # Published: 7,615,616,512 parameters (index total_size 15,231,233,024 bytes in bf16; "7.61B" on the model
    # card). Qwen2.5-7B-Instruct's config differs (max_position_embeddings 32768), so it is not an alias.
    "qwen2.5-7b": ModelShape(
        name="qwen2.5-7b",
        hf_id="Qwen/Qwen2.5-7B",
        vocab_size=152064,
        hidden_size=3584,
        intermediate_size=18944,
        num_layers=28,
        num_heads=28,
        num_kv_heads=4,
        max_position_embeddings=131072,
        model_type="qwen2",
        attention_bias=True,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
    ),
    # Published: 8,190,735,360 parameters (index total_size 16,381,470,720 bytes in bf16; "8.2B" on the model card).
    "qwen3-8b": ModelShape(
        name="qwen3-8b",
        hf_id="Qwen/Qwen3-8B",
        vocab_size=151936,
        hidden_size=4096,
        intermediate_size=12288,
        num_layers=36,
        num_heads=32,
        num_kv_heads=8,
        max_position_embeddings=40960,
        model_type="qwen3",
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
    ),
    # Published: 7,248,023,552 parameters (index total_size 14,496,047,104 bytes in bf16). v0.3's vocabulary is
    # 32768 (v0.2's 32000 plus control tokens); no sliding window since v0.2.
    "mistral-7b-v0.3": ModelShape(
        name="mistral-7b-v0.3",
        hf_id="mistralai/Mistral-7B-v0.3",
        vocab_size=32768,
        hidden_size=4096,
        intermediate_size=14336,
        num_layers=32,
        num_heads=32,
        num_kv_heads=8,
        max_position_embeddings=32768,
        model_type="mistral",
        rope_theta=1000000.0,
        rms_norm_eps=1e-5,
        aliases=("mistralai/Mistral-7B-Instruct-v0.3",),
    ),
}


def find_shape(model: str) -> ModelShape | None:
    """The shape for a preset name, its hub id or one of its aliases (the -Instruct and chat checkpoints of the
    same shape), case-insensitive.

    Returns None for models the project does not know by name (a local directory, another hub id): the trainer
    then reads their config.json, and the sizing math asks for an explicit shape.
    """
    wanted = model.strip().lower()
    for shape in PRESETS.values():
        names = {shape.name, *(hub_id.lower() for hub_id in (shape.hf_id, *shape.aliases) if hub_id)}
        if wanted in names:
            return shape
    return None
