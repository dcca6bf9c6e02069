"""Peak memory per rank of the trainer's FSDP2 fine-tuning step, buffer by buffer. Pure Python, no torch.

What is modelled is what trainer/ builds (trainer/parallel/parallelize.py, trainer/train.py, trainer/optim.py):
- each decoder layer is one FSDP2 unit (the last kept gathered from its forward to its backward), the input
  embedding one more (gathered for its forward only: its
  backward needs no weight), the final norm with the output layer another (the head: gathered from its forward
  to the end of its backward, its gradients reduce-scattered right after); with tied embeddings the root holds
  embedding, norm and output together, gathered throughout and reduced last; SHARD_GRAD_OP and NO_SHARD keep
  every layer gathered from its forward to its backward (reshard_after_forward=False);
- parameters are fp32 shards; forward and backward run on unsharded copies in the mixed-precision dtype
  (MixedPrecisionPolicy param_dtype), gradients are reduce-scattered in fp32 into fp32 shards;
- AdamW keeps two fp32 moments per parameter (torch.optim.AdamW: exp_avg and exp_avg_sq);
- the model is transformers' LlamaForCausalLM; its attention keeps each packed record to itself
  (trainer/model/attention.py): on a GPU flex attention, which saves what flash SDPA saves (the output and a
  log-sum-exp per head) and reads a BlockMask of a few integers per 128 x 128 tile (kilobytes: not counted); on a
  CPU each layer's SDPA saves the records' mask in the compute dtype (batch x seq^2 values); the loss is the
  chunked fp32 cross-entropy of trainer/model/loss.py, which makes the output layer's gradients in its forward and
  holds one chunk's logits at a time (loss_bytes counts every tensor it allocates);
- with LoRA (--lora-rank, trainer/model/lora.py) the base is frozen and held in the compute dtype (no gradient,
  no optimizer state, nothing of it reduced: the head and the embedding reduce nothing at all), and only the fp32
  adapters have gradients and AdamW moments; each layer gathers its adapters with its base, and saves each
  adapter's r-wide intermediate for backward (peft's lora.Linear: lora_B's input). That the frozen base may let
  autograd save less than a trained one is not counted: for LoRA the activations are an upper bound.

The peak is the largest of a few moments of a training step (`MOMENTS`), each the sum of the buffers alive then.
FSDP2 buffer lifetimes follow torch/distributed/fsdp/_fully_shard (torch 2.13): in forward the previous layer's
all-gather output is freed after the next copy-out; in backward one layer is prefetched, the unsharded
parameters are freed before the reduce-scatter buffers are allocated, and one reduce-scatter input is kept until
the next layer's reduce-scatter. A process group of one copies the shard instead of all-gathering into a buffer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainer.base.flags.config import LORA_TARGETS, ParallelConfig, TrainConfig
from trainer.base.flags.parallel_plan import mesh_shape
from trainer.base.model.loss_chunks import CHUNK_TOKENS, VECTOR_BYTES_PER_TOKEN, accumulator_precision
from trainer.base.model.presets import ModelShape
from trainer.base.pod.env import DistEnv
from trainer.base.units import DTYPE_BYTES

FP32 = 4
INT64 = 8
CHECKPOINTING = ("none", "selective", "selective-mm", "full")  # the activations each keeps, most first


@dataclass(frozen=True)
class Job:
    """What one rank trains: the model, its micro batch and the trainer's parallelism flags."""

    shape: ModelShape
    seq_len: int
    batch_size: int = 1
    """Sequences per rank per micro step."""
    sharding_strategy: str = "FULL_SHARD"
    mixed_precision: str = "bf16"
    activation_checkpointing: str = "none"
    grad_accum: int = 1
    """Micro steps per optimizer step; above 1, the gradient shards live through every forward and backward."""
    lora_rank: int = 0
    """LoRA's rank (--lora-rank); 0 is full fine-tuning."""
    lora_targets: tuple[str, ...] = LORA_TARGETS
    """The linear layers with adapters (--lora-targets)."""
    compile: bool = False
    """torch.compile of each decoder layer (--compile): sizing/throughput.py's element-wise time; memory unchanged."""
    all_reduce_dtype: str = "fp32"
    """The dtype of HYBRID_SHARD's all-reduce across replica groups (--all-reduce-dtype): its bytes on the network."""

    @classmethod
    def of(cls, shape: ModelShape, config: TrainConfig, grad_accum: int) -> Job:
        """What one rank of a run with the trainer's options `config` trains."""
        parallel = config.parallel
        return cls(
            shape, config.data.seq_len, config.schedule.batch_size, parallel.sharding_strategy,
            parallel.mixed_precision, parallel.activation_checkpointing, grad_accum, config.lora.rank,
            tuple(config.lora.target_list()), parallel.compile, parallel.all_reduce_dtype,
        )  # fmt: skip

    def settings(self) -> dict[str, object]:
        """The choices it was sized with, by name, as `python -m sizing --json` prints them."""
        return {
            "sharding_strategy": self.sharding_strategy,
            "mixed_precision": self.mixed_precision,
            "activation_checkpointing": self.activation_checkpointing,
            "compile": self.compile,
            "all_reduce_dtype": self.all_reduce_dtype,
            "seq_len": self.seq_len,
            "batch_size": self.batch_size,
            "grad_accum": self.grad_accum,
            "lora_rank": self.lora_rank,
        }

    @property
    def tokens(self) -> int:
        return self.batch_size * self.seq_len

    @property
    def compute_bytes(self) -> int:
        return DTYPE_BYTES[self.mixed_precision]


@dataclass(frozen=True)
class Ranks:
    """Where the job runs: how many ranks, how many per node, and on what (the optimizer differs, see below)."""

    world_size: int
    per_node: int
    device: str = "gpu"
    """gpu or cpu: the runtime term and the collectives' staging buffers differ (gloo on CPU, NCCL on GPU)."""

    def mesh(self, strategy: str) -> tuple[int, int]:
        """(replicate, shard): the trainer's own device mesh for the strategy (trainer/base/flags/parallel_plan.py),
        with torchrun's local world size (never more than the whole world) and one replicate group per node, the
        trainer's default."""
        env = DistEnv(world_size=self.world_size, local_world_size=min(self.per_node, self.world_size))
        return mesh_shape(TrainConfig(parallel=ParallelConfig(sharding_strategy=strategy)), env)

    def shard_size(self, strategy: str) -> int:
        """Ranks one parameter is sharded over."""
        return self.mesh(strategy)[1]

    def replicate_size(self, strategy: str) -> int:
        """Replicas of each shard: gradients are all-reduced across them (HYBRID_SHARD, NO_SHARD)."""
        return self.mesh(strategy)[0]


@dataclass(frozen=True)
class MemoryEstimate:
    """The buffers alive at one moment of a step, in bytes per rank; `total` is their sum."""

    moment: str
    terms: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.terms.values())


def layer_parameter_shapes(shape: ModelShape) -> list[tuple[int, int]]:
    """(rows, columns) of each parameter of one decoder layer; FSDP2 shards rows (dim 0)."""
    h, i, q, kv = shape.hidden_size, shape.intermediate_size, shape.q_width, shape.kv_width
    attention = [(q, h), (kv, h), (kv, h), (h, q)]  # q, k, v, o
    if shape.attention_bias:  # Qwen2 always; Llama and Qwen3 by config, with o's bias too
        attention += [(q, 1), (kv, 1), (kv, 1), *([(h, 1)] if shape.o_bias else [])]
    if shape.qk_norm:  # Qwen3: one RMSNorm weight of head_dim for q, one for k
        attention += [(shape.head_dim, 1), (shape.head_dim, 1)]
    mlp = [(i, h), (i, h), (h, i), *([(i, 1), (i, 1), (h, 1)] if shape.mlp_bias else [])]  # gate, up, down
    return [*attention, *mlp, (h, 1), (h, 1)]  # and the two RMSNorm weights


def adapter_shapes(shape: ModelShape, rank: int, targets: tuple[str, ...]) -> list[tuple[int, int]]:
    """(rows, columns) of one decoder layer's LoRA adapters, in registration order: per target linear of (out, in),
    A (rank, in) and B (out, rank) (peft/tuners/lora/layer.py LoraLayer.update_layer). None without LoRA."""
    if not rank:
        return []
    h, i, q, kv = shape.hidden_size, shape.intermediate_size, shape.q_width, shape.kv_width
    linear = {"q_proj": (q, h), "k_proj": (kv, h), "v_proj": (kv, h), "o_proj": (h, q), "gate_proj": (i, h),
              "up_proj": (i, h), "down_proj": (h, i)}  # fmt: skip
    found: list[tuple[int, int]] = []
    for name in LORA_TARGETS:  # the layer's module order
        if name in targets:
            rows, cols = linear[name]
            found += [(rank, cols), (rows, rank)]
    return found


def adapter_parameters(shape: ModelShape, rank: int, targets: tuple[str, ...]) -> int:
    """Parameters LoRA trains in the whole model."""
    return shape.num_layers * numel(adapter_shapes(shape, rank, targets))


def lora_saved_bytes(shape: ModelShape, tokens: int, compute_bytes: int, rank: int, targets: tuple[str, ...],
                     mode: str) -> int:  # fmt: skip
    """What a layer's adapters add to what it keeps for backward. Without checkpointing each lora_B saves its r-wide
    input (lora_A's output). The selective policies recompute the adapters' narrow matmuls
    (trainer/parallel/parallelize.py is_narrow_matmul): nothing of them is kept but peft's scaling factor; full
    keeps only the layer's input. Measured to the byte by tests/sizing/trainer_memory/test_checkpointed_formula.py."""
    adapters = adapter_shapes(shape, rank, targets)
    if not adapters or mode == "full":
        return 0
    if mode == "none":
        return tokens * compute_bytes * rank * (len(adapters) // 2)
    return PEFT_SCALING_BYTES * (len(adapters) // 2)


PEFT_SCALING_BYTES = 8
"""peft's lora.Linear multiplies lora_B's output by `scaling`, a Python float: autograd keeps it as a float64
scalar tensor (measured: 8 bytes per adapted projection under selective and selective-mm)."""


def root_parameter_shapes(shape: ModelShape) -> list[tuple[int, int]]:
    """Every parameter outside the decoder layers: input embedding, final norm and (untied) output layer."""
    embeddings = [(shape.vocab_size, shape.hidden_size)] * (1 if shape.tie_word_embeddings else 2)
    return [*embeddings, (shape.hidden_size, 1)]


def head_parameter_shapes(shape: ModelShape) -> list[tuple[int, int]]:
    """The unit that runs last in forward: final norm and output layer (tied: the root, with the embedding)."""
    if shape.tie_word_embeddings:
        return root_parameter_shapes(shape)
    return [(shape.hidden_size, 1), (shape.vocab_size, shape.hidden_size)]


def embedding_parameter_shapes(shape: ModelShape) -> list[tuple[int, int]]:
    """The input embedding's own unit; none when it is tied to the output layer (then it is in the head)."""
    return [] if shape.tie_word_embeddings else [(shape.vocab_size, shape.hidden_size)]


def shard_numel(shapes: list[tuple[int, int]], shard: int) -> int:
    """Elements one rank holds: FSDP2 pads dim 0 to a multiple of the shard count (torch.chunk sizes)."""
    return sum(-(-rows // shard) * cols for rows, cols in shapes)


def numel(shapes: list[tuple[int, int]]) -> int:
    return sum(rows * cols for rows, cols in shapes)


def layer_activation_bytes(shape: ModelShape, tokens: int, compute_bytes: int) -> int:
    """Bytes one decoder layer saves for backward (no checkpointing), counted tensor by tensor.

    The method is Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
    section 4.1 (sum the tensors autograd saves), redone for transformers' Llama layer instead of GPT's
    (per token, e = compute dtype bytes, h hidden, kv key/value width, I MLP width):
    - each RMSNorm upcasts its input to fp32 and saves it (4h), saves the normalised value and its output (2eh)
      and 1/rms (4): two norms, 8h + 4eh + 8;
    - attention saves q and k after RoPE, v, and the SDPA output (which o_proj reads as its input, same storage):
      e(2q + 2kv) with q = heads x head_dim (h unless a config sets head_dim apart), plus the fp32 log-sum-exp per
      head (4 x heads). Flash/efficient SDPA and flex attention keep no s x s scores, so the paper's 5as/h term
      is gone;
    - Qwen3's per-head RMSNorms on q and k (Qwen3RMSNorm) each save their fp32 input, their normalised output in
      the compute dtype and 1/rms per head: (4 + e)(q + kv) + 4(heads + kv heads);
    - the SwiGLU MLP saves gate, SiLU(gate), up and their product: 4eI (the paper's GeLU MLP of width 4h
      saves 19h including dropout masks; Llama has no dropout).
    tests/sizing/trainer_memory/test_activation_formula.py checks this against autograd's saved tensors, to the byte.
    """
    h, i, e, q, kv = shape.hidden_size, shape.intermediate_size, compute_bytes, shape.q_width, shape.kv_width
    per_token = 8 * h + 4 * e * h + 8 + e * (2 * q + 2 * kv) + FP32 * shape.num_heads + 4 * e * i
    if shape.qk_norm:
        per_token += (FP32 + e) * (q + kv) + FP32 * (shape.num_heads + shape.num_kv_heads)
    return tokens * per_token


def checkpointed_layer_bytes(shape: ModelShape, tokens: int, compute_bytes: int, mode: str) -> int:
    """Bytes one layer keeps between its forward and its backward under activation checkpointing.

    full: only the layer's input (the checkpoint wrapper's argument). selective (trainer/parallel/parallelize.py's
    policy): the input plus the outputs of every matmul (q, k, v, o, gate, up, down projections) and of SDPA
    (output and log-sum-exp); norms, RoPE and SiLU are recomputed. selective-mm: as selective, but every second
    matmul in forward order is recomputed, so of the seven projections q, v, gate and down keep their outputs.
    tests/sizing/trainer_memory/test_checkpointed_formula.py checks each against what a checkpointed layer holds.
    """
    h, i, e, q, kv = shape.hidden_size, shape.intermediate_size, compute_bytes, shape.q_width, shape.kv_width
    if mode == "none":
        return layer_activation_bytes(shape, tokens, compute_bytes)
    if mode == "full":
        return tokens * e * h
    if mode == "selective-mm":
        return tokens * (e * (h + (q + kv + i + h) + q) + FP32 * shape.num_heads)
    return tokens * (e * (h + (q + 2 * kv + 2 * h + 2 * i) + q) + FP32 * shape.num_heads)


def recomputed_layer_bytes(shape: ModelShape, tokens: int, compute_bytes: int, mode: str) -> int:
    """Bytes a checkpointed layer adds while it is recomputed for its backward: its full saved set, less what it
    shares with what checkpointing kept. In fp32 the first norm saves the layer input itself; under selective
    checkpointing the recompute takes the cached matmul and SDPA outputs instead of recomputing them, so v, the
    SDPA output and log-sum-exp, gate and up are not held twice; under selective-mm, whose policy recomputes up, all
    of these but up."""
    if mode == "none":
        return 0
    h, i, e, q, kv = shape.hidden_size, shape.intermediate_size, compute_bytes, shape.q_width, shape.kv_width
    shared = tokens * FP32 * h if e == FP32 else 0
    if mode == "selective":
        shared += tokens * (e * (kv + q + 2 * i) + FP32 * shape.num_heads)
    if mode == "selective-mm":
        shared += tokens * (e * (kv + q + i) + FP32 * shape.num_heads)
    return layer_activation_bytes(shape, tokens, compute_bytes) - shared


@dataclass(frozen=True)
class LossBytes:
    """What trainer/model/loss.py's chunked cross-entropy allocates in a training step, in bytes."""

    retained: int
    """Alive from the loss's forward into backward: the output layer's input gradient (compute dtype), its weight
    gradient (in the accumulator's precision; none for a frozen weight) and the loss."""
    weight_gradient: int
    """The weight gradient's share of `retained`."""
    chunk: int
    """The most alive at once above `retained` during the forward: a chunk's logits in fp32 beside their compute-dtype
    matmul output (or, later, beside their gradient in the compute dtype), or, for fp16, that gradient beside one
    chunk's weight-gradient product and its fp32 copy; plus the per-token vectors' bound."""
    cast: int
    """Backward's one allocation: under fp16 the weight gradient cast back to fp16 beside its fp32 sum."""


def loss_bytes(
    shape: ModelShape, tokens: int, precision: str, trains_weight: bool, chunk_tokens: int = CHUNK_TOKENS
) -> LossBytes:
    """The chunked loss over `tokens` tokens of one micro batch, the output layer in `precision`."""
    e, v, h = DTYPE_BYTES[precision], shape.vocab_size, shape.hidden_size
    summed = DTYPE_BYTES[accumulator_precision(precision)]
    chunk = min(chunk_tokens, tokens)
    logits = FP32 * chunk * v + (e * chunk * v if e != FP32 else 0)  # .float() copies unless already fp32
    # fp16: the chunk's gradient, its weight-gradient product and that product's fp32 copy, then added to the sum.
    product = e * chunk * v + (e + FP32) * v * h if trains_weight and summed != e else 0
    weight_gradient = summed * v * h if trains_weight else 0
    return LossBytes(
        retained=e * tokens * h + weight_gradient + FP32,
        weight_gradient=weight_gradient,
        chunk=max(logits, product) + VECTOR_BYTES_PER_TOKEN * chunk,
        cast=e * v * h if trains_weight and summed != e else 0,
    )


@dataclass(frozen=True)
class _Sizes:
    """The per-rank quantities every moment is built from (bytes unless named numel)."""

    layers: int
    layer_shard: int  # numel, LoRA's adapters included
    head_shard: int  # numel
    embedding_shard: int  # numel
    layer_trained: int  # numel of the layer's shard that is trained (LoRA: its adapters)
    head_trained: int
    embedding_trained: int
    split: bool  # embedding and head are units of their own (untied embeddings)
    gathered_layer: int  # a layer's unsharded parameters in the compute dtype (padded)
    gathered_head: int
    all_gather_buffer: int  # the flat all-gather output of one layer; none in a group of one
    layer_grad: int  # a layer's unsharded gradients as autograd makes them (compute dtype)
    head_grad: int
    embedding_grad: int
    output_layer_grad: int
    reduce_scatter_layer: int  # fp32 reduce-scatter input of one layer (padded)
    reduce_scatter_head: int
    reduce_scatter_embedding: int
    saved_layer: int  # what one layer keeps for backward under the job's checkpointing
    recomputed_layer: int  # what recomputing one checkpointed layer adds in its backward
    shared_saved: int  # RoPE cos/sin, token ids, and the final norm's saved tensors
    in_flight_grads: int  # gradients of activations inside one layer's backward
    loss: LossBytes
    head_input_grad: int  # the gradient the head hands to the last layer (compute dtype)
    optimizer_temporaries: int
    reduce_scatter_temporary: int  # ... while one layer's gradients are reduce-scattered
    head_reduce_scatter_temporary: int
    embedding_reduce_scatter_temporary: int
    held_layer_grad: int  # the last parameter's unsharded gradient, alive through the reduce-scatter (S > 1)
    held_head_grad: int
    held_embedding_grad: int
    keeps_layers_gathered: bool
    last_layer_kept: int  # the last layer's unsharded parameters from its forward to its backward (if resharded)


def _sizes(job: Job, ranks: Ranks) -> _Sizes:
    shape, e, tokens = job.shape, job.compute_bytes, job.tokens
    shard = ranks.shard_size(job.sharding_strategy)
    layer, head, embedding = (
        layer_parameter_shapes(shape),
        head_parameter_shapes(shape),
        embedding_parameter_shapes(shape),
    )
    lora = job.lora_rank > 0
    adapters = adapter_shapes(shape, job.lora_rank, job.lora_targets)
    trained = adapters if lora else layer
    layer = [*layer, *adapters]
    layer_shard, head_shard, embedding_shard = (shard_numel(p, shard) for p in (layer, head, embedding))
    head_trained, embedding_trained = (0, 0) if lora else (head_shard, embedding_shard)
    layer_trained = shard_numel(trained, shard)
    h, v, i = shape.hidden_size, shape.vocab_size, shape.intermediate_size
    kv = shape.num_kv_heads * shape.head_dim
    # trainer/optim.py takes AdamW's fused kernel on CPU and CUDA: it updates each tensor in place, one element at a
    # time, with no temporaries (torch/optim/adam.py _fused_adam; aten's FusedAdam kernels).
    optimizer_temporaries = 0
    # NCCL works in its own fixed buffers (part of the GPU runtime term). gloo's all_gather_into_tensor stages the
    # whole output and its reduce_scatter_tensor a copy of the whole input (measured on torch 2.13: one extra
    # buffer of that size each; all_reduce works in place).
    gloo = ranks.device == "cpu" and shard > 1
    lora_saved = lora_saved_bytes(shape, tokens, e, job.lora_rank, job.lora_targets, job.activation_checkpointing)
    # On a CPU the records' attention mask is SDPA's (trainer/model/attention.py boolean_mask): each layer's SDPA turns
    # the boolean [batch, 1, seq, seq] mask into one of the compute dtype and saves it for its backward (a layer
    # recomputed under checkpointing makes it again). A GPU's flex attention reads a BlockMask of kilobytes instead.
    cpu_mask = job.batch_size * job.seq_len**2 * e if ranks.device == "cpu" else 0
    return _Sizes(
        layers=shape.num_layers,
        layer_shard=layer_shard,
        head_shard=head_shard,
        embedding_shard=embedding_shard,
        layer_trained=layer_trained,
        head_trained=head_trained,
        embedding_trained=embedding_trained,
        split=not shape.tie_word_embeddings,
        gathered_layer=e * shard * layer_shard,
        gathered_head=e * shard * head_shard,
        all_gather_buffer=e * shard * layer_shard if shard > 1 else 0,
        layer_grad=e * numel(trained),
        head_grad=0 if lora else e * numel(head),
        embedding_grad=0 if lora else e * numel(embedding),
        output_layer_grad=0 if lora else e * v * h,
        reduce_scatter_layer=FP32 * shard * layer_trained,
        reduce_scatter_head=FP32 * shard * head_trained,
        reduce_scatter_embedding=FP32 * shard * embedding_trained,
        saved_layer=checkpointed_layer_bytes(shape, tokens, e, job.activation_checkpointing)
        + lora_saved
        + (cpu_mask if job.activation_checkpointing == "none" else 0),
        # A recomputed layer saves its adapters' r-wide intermediates again: every checkpointing mode recomputes the
        # adapters' matmuls (the selective ones too, trainer/parallel/parallelize.py is_narrow_matmul).
        recomputed_layer=recomputed_layer_bytes(shape, tokens, e, job.activation_checkpointing)
        + (
            lora_saved_bytes(shape, tokens, e, job.lora_rank, job.lora_targets, "none")
            if job.activation_checkpointing != "none"
            else 0
        )
        + (cpu_mask if job.activation_checkpointing != "none" else 0),
        # cos and sin (one per position, shared by all layers), token ids, final norm (as a layer's norm).
        shared_saved=2 * job.seq_len * shape.head_dim * e + INT64 * tokens + tokens * (4 * h + 2 * e * h + 4),
        # Inside a layer's backward: the MLP's product, SiLU and up gradients and the residual gradient, or
        # the q/k/v gradients of SDPA, whichever is larger.
        in_flight_grads=tokens * e * max(2 * i + h, shape.q_width + h + 2 * kv),
        loss=loss_bytes(shape, tokens, job.mixed_precision, trains_weight=not lora),
        head_input_grad=e * tokens * h,
        optimizer_temporaries=optimizer_temporaries,
        reduce_scatter_temporary=FP32 * shard * layer_trained if gloo else 0,
        head_reduce_scatter_temporary=FP32 * shard * head_trained if gloo else 0,
        embedding_reduce_scatter_temporary=FP32 * shard * embedding_trained if gloo else 0,
        # Registration order: a layer ends with its post-attention norm weight (LoRA: its last adapter's B), the head
        # (and a tied root) with the output layer, the embedding unit is its one weight.
        held_layer_grad=(e * numel(adapters[-1:]) if lora else e * h) if shard > 1 else 0,
        held_head_grad=e * v * h if shard > 1 and not lora else 0,
        held_embedding_grad=e * numel(embedding) if shard > 1 and not lora else 0,
        # trainer/parallel/parallelize.py: reshard_after_forward only for FULL_SHARD and HYBRID_SHARD.
        keeps_layers_gathered=job.sharding_strategy in ("SHARD_GRAD_OP", "NO_SHARD"),
        # trainer/parallel/parallelize.py apply_fsdp: never resharded after its forward.
        last_layer_kept=0 if job.sharding_strategy in ("SHARD_GRAD_OP", "NO_SHARD") else e * shard * layer_shard,
    )


MOMENTS = (
    "loss",
    "output layer backward",
    "head reduce-scatter",
    "last layer backward",
    "first layer backward",
    "first layer reduce-scatter",
    "embedding backward",
    "embedding reduce-scatter",
    "optimizer step",
)
TERMS = (
    "runtime",
    "parameters",
    "gradients",
    "optimizer_states",
    "unsharded_parameters",
    "unsharded_gradients",
    "communication_buffers",
    "activations",
    "loss_buffers",
    "optimizer_temporaries",
)


def _reduce_scatter(grads: int, staged: int, output: int, temporary: int, held: int) -> dict[str, int]:
    """The larger of a reduce-scatter's two phases: the unsharded gradients copied into the fp32 input, then the
    collective writing the output shard with whatever it stages itself. The gradients are freed in between except
    `held`: in a group of more than one rank, foreach_reduce's loop variable keeps the group's last unsharded
    gradient alive until it returns (torch 2.13 _fsdp_collectives.py)."""
    if grads >= output + temporary + held:
        return {"unsharded_gradients": grads, "communication_buffers": staged}
    return {"unsharded_gradients": held, "communication_buffers": staged + output + temporary}


@dataclass(frozen=True)
class _Step:
    """What every moment of one step's backward shares: the sizes, and what the sharding strategy and a tied
    embedding keep alive throughout."""

    job: Job
    z: _Sizes
    runtime_bytes: int
    total_shard: int  # numel of the rank's whole shard
    trained_shard: int  # numel of the part of it that is trained (LoRA: the adapters)
    all_gathered: int  # every layer gathered (SHARD_GRAD_OP, NO_SHARD keep them after the forward)
    prefetch_buffer: int  # the next layer's all-gather output, when layers are resharded after use
    # Untied: the head is resharded and reduced right after its backward, before the layers'. Tied: the root stays
    # gathered to the end of the step, its output-layer gradient waiting for its reduce-scatter there.
    head_after_backward: int
    output_grad_after_backward: int
    head_reduced: int  # numel of the head's gradient shard once reduced (untied only)

    def moment(self, name: str, gradient_shards: int, **terms: int) -> MemoryEstimate:
        """The sharded state plus `terms`. `gradient_shards` (numel) have been reduced so far in this backward;
        from the second micro step of an accumulating step on, all of them exist throughout."""
        reduced = self.trained_shard if self.job.grad_accum > 1 else gradient_shards
        frozen = self.total_shard - self.trained_shard  # LoRA's base, held in the compute dtype
        state = {
            "runtime": self.runtime_bytes,
            "parameters": FP32 * self.trained_shard + self.job.compute_bytes * frozen,
            "gradients": FP32 * reduced,
            "optimizer_states": 2 * FP32 * self.trained_shard,
        }
        return MemoryEstimate(name, {term: state.get(term, terms.get(term, 0)) for term in TERMS})

    def saved(self, layers: int) -> int:
        """Activations saved for backward by `layers` layers and by what all layers share."""
        return layers * self.z.saved_layer + self.z.shared_saved


def _step(job: Job, ranks: Ranks, runtime_bytes: int) -> _Step:
    z = _sizes(job, ranks)
    return _Step(
        job=job,
        z=z,
        runtime_bytes=runtime_bytes,
        total_shard=z.layers * z.layer_shard + z.head_shard + z.embedding_shard,
        trained_shard=z.layers * z.layer_trained + z.head_trained + z.embedding_trained,
        all_gathered=z.layers * z.gathered_layer if z.keeps_layers_gathered else 0,
        prefetch_buffer=0 if z.keeps_layers_gathered else z.all_gather_buffer,
        head_after_backward=0 if z.split else z.gathered_head,
        output_grad_after_backward=0 if z.split else z.output_layer_grad,
        head_reduced=z.head_trained if z.split else 0,
    )


def _loss_and_head_moments(s: _Step) -> list[MemoryEstimate]:
    """From the loss to the head's reduce-scatter: MOMENTS[0:3]. The last layer is gathered throughout (resharded
    units), so the head's backward prefetches nothing."""
    z, loss = s.z, s.z.loss
    gathered = s.all_gathered + z.last_layer_kept
    head_reduce = _reduce_scatter(
        z.head_grad, z.reduce_scatter_head, FP32 * z.head_trained, z.head_reduce_scatter_temporary, z.held_head_grad
    )
    return [
        # The loss's forward: every layer's activations saved, the output layer's input and weight gradients made,
        # one chunk's logits alive.
        s.moment(
            MOMENTS[0],
            0,
            unsharded_parameters=z.gathered_head + gathered,
            unsharded_gradients=loss.weight_gradient,
            activations=s.saved(z.layers),
            loss_buffers=loss.retained - loss.weight_gradient + loss.chunk,
        ),
        # The output layer's backward hands on its gradients (under fp16 the weight's cast back beside its fp32 sum).
        s.moment(
            MOMENTS[1],
            0,
            unsharded_parameters=z.gathered_head + gathered,
            unsharded_gradients=loss.weight_gradient + loss.cast,
            activations=s.saved(z.layers),
            loss_buffers=loss.retained - loss.weight_gradient,
        ),
        # Untied: the head's reduce-scatter, its parameters resharded first. Tied: nothing is reduced yet. Either
        # way the head's input gradient waits for the last layer's backward.
        s.moment(
            MOMENTS[2],
            0,
            unsharded_parameters=gathered,
            **head_reduce,
            activations=s.saved(z.layers),
            loss_buffers=z.head_input_grad,
        )
        if z.split
        else s.moment(
            MOMENTS[2],
            0,
            unsharded_parameters=z.gathered_head + gathered,
            unsharded_gradients=z.output_layer_grad,
            activations=s.saved(z.layers),
            loss_buffers=z.head_input_grad,
        ),
    ]


def _layer_backward(s: _Step, name: str, index: int) -> MemoryEstimate:
    """While layer `index` (the last or the first) runs backward: layers up to it still saved (and it recomputed
    under checkpointing), it gathered and the next one prefetched (SHARD_GRAD_OP, NO_SHARD: every layer not yet
    reduced stays gathered), the previous layer's reduce-scatter input kept (after the head's, for the last)."""
    z = s.z
    gathered = (index + 1 if z.keeps_layers_gathered else 1) * z.gathered_layer
    kept_input = z.reduce_scatter_layer if index < z.layers - 1 else (z.reduce_scatter_head if z.split else 0)
    return s.moment(
        name,
        s.head_reduced + (z.layers - 1 - index) * z.layer_trained,
        unsharded_parameters=s.head_after_backward + gathered,
        unsharded_gradients=s.output_grad_after_backward,
        communication_buffers=(s.prefetch_buffer if index > 0 else 0) + kept_input,
        activations=s.saved(index + 1) + z.recomputed_layer + z.in_flight_grads,
    )


def _last_reductions_and_update(s: _Step) -> list[MemoryEstimate]:
    """From layer 0's reduce-scatter to the optimizer step: MOMENTS[5:9]."""
    z = s.z
    first_layer_reduce = _reduce_scatter(
        z.layer_grad, z.reduce_scatter_layer, FP32 * z.layer_trained, z.reduce_scatter_temporary, z.held_layer_grad
    )
    first_layer_reduce["unsharded_gradients"] += s.output_grad_after_backward
    # The last unit reduced: the embedding's own (untied), else the root with everything outside the layers.
    last_grad, last_input, last_shard, last_temporary, last_held = (
        (z.embedding_grad, z.reduce_scatter_embedding, z.embedding_trained, z.embedding_reduce_scatter_temporary,
         z.held_embedding_grad)
        if z.split
        else (z.head_grad, z.reduce_scatter_head, z.head_trained, z.head_reduce_scatter_temporary, z.held_head_grad)
    )  # fmt: skip
    last_reduce = _reduce_scatter(last_grad, last_input, FP32 * last_shard, last_temporary, last_held)
    layer_shards = z.layers * z.layer_trained
    return [
        # Layer 0's reduce-scatter: its parameters are resharded before the fp32 input is allocated.
        s.moment(
            MOMENTS[5],
            s.head_reduced + (z.layers - 1) * z.layer_trained,
            unsharded_parameters=s.head_after_backward,
            **first_layer_reduce,
            activations=z.shared_saved,
        ),
        # Embedding backward: its whole unsharded gradient exists (its weight is not gathered for it; a tied root's
        # is); layer 0's reduce-scatter input is kept until the next reduce-scatter.
        s.moment(
            MOMENTS[6],
            s.head_reduced + layer_shards,
            unsharded_parameters=s.head_after_backward,
            unsharded_gradients=last_grad,
            communication_buffers=z.reduce_scatter_layer,
        ),
        # The last reduce-scatter of the step: the embedding's (or the tied root's, after it is resharded).
        s.moment(MOMENTS[7], s.head_reduced + layer_shards, **last_reduce),
        s.moment(MOMENTS[8], s.trained_shard, optimizer_temporaries=z.optimizer_temporaries),
    ]


def memory_moments(job: Job, ranks: Ranks, runtime_bytes: int = 0) -> list[MemoryEstimate]:
    """Every modelled moment of a step, in `MOMENTS` order, each with its live buffers by kind (`TERMS`): the loss
    and the head, the last and the first layer's backward, then the last reductions and the optimizer step."""
    s = _step(job, ranks, runtime_bytes)
    return [
        *_loss_and_head_moments(s),
        _layer_backward(s, MOMENTS[3], s.z.layers - 1),
        _layer_backward(s, MOMENTS[4], 0),
        *_last_reductions_and_update(s),
    ]


def peak_memory(job: Job, ranks: Ranks, runtime_bytes: int = 0) -> MemoryEstimate:
    """The moment with the most memory alive: the rank's peak."""
    return max(memory_moments(job, ranks, runtime_bytes), key=lambda estimate: estimate.total)
