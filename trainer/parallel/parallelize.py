"""Parallelism, kept apart from the model and the loop: a few ordered functions composed by `parallelize`.

Strategy -> device mesh -> fully_shard settings:
- FULL_SHARD:    1-D mesh (dp_shard=world);            reshard_after_forward=True
- SHARD_GRAD_OP: 1-D mesh (dp_shard=world);            reshard_after_forward=False
- HYBRID_SHARD:  2-D mesh (dp_replicate=groups, dp_shard=world/groups): HSDP, sharded within a group,
                 gradients all-reduced across groups;   reshard_after_forward=True
- NO_SHARD:      2-D mesh (dp_replicate=world, dp_shard=1): every rank holds everything, gradients
                 all-reduced (pure replication through the same HSDP code path)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

from trainer.base.flags.config import ParallelConfig
from trainer.base.flags.parallel_plan import RunPlan
from trainer.comms.reduce_scatter import PairwiseReduceScatter
from trainer.dtypes import TORCH_DTYPES
from trainer.model.build import decoder_layers, final_norm
from trainer.model.lora import lora_layers
from trainer.parallel.all_reduce import REPLICATE_DIM, apply_bf16_all_reduce
from trainer.parallel.embedding import VocabShardedEmbedding


def build_mesh(strategy: str, plan: RunPlan, device_type: str) -> DeviceMesh:
    if strategy in ("FULL_SHARD", "SHARD_GRAD_OP"):
        return init_device_mesh(device_type, (plan.shard,), mesh_dim_names=("dp_shard",))
    return init_device_mesh(device_type, (plan.replicate, plan.shard), mesh_dim_names=(REPLICATE_DIM, "dp_shard"))


def _kept_ops() -> set[object]:
    """What selective checkpointing keeps: matmuls and attention, expensive to recompute (norms, SiLU, RoPE are not)."""
    from torch import _higher_order_ops as higher_order_ops

    aten = torch.ops.aten
    kept: set[object] = {
        aten._scaled_mm.default,  # FP8 matmuls (torchao); torchtitan's selective checkpointing keeps them too
        # FP8's amax, the max of |x| over a tensor (torchao's tensor-wise scaling): a full reduction, cheap to keep and
        # in recompute a second pass over the activation; torchtitan's op save list keeps it too.
        aten.max.default,
        aten.mm.default,
        aten.addmm.default,
        aten.bmm.default,
        aten._scaled_dot_product_flash_attention.default,
        aten._scaled_dot_product_efficient_attention.default,
        aten._scaled_dot_product_cudnn_attention.default,
        aten._scaled_dot_product_flash_attention_for_cpu.default,
        # Flex attention (the CUDA path of trainer/model/attention.py) as torchtitan's op save list names it.
        higher_order_ops.flex_attention,
    }
    compiled = getattr(higher_order_ops, "inductor_compiled_code", None)  # a compiled flex call, newer torch
    if compiled is not None:
        kept.add(compiled)
    return kept


def _matmuls() -> set[object]:
    """The operators a Linear becomes below the dispatcher: mm, addmm with a bias, _scaled_mm under FP8."""
    aten = torch.ops.aten
    return {aten.mm.default, aten.addmm.default, aten._scaled_mm.default}


def narrow_width(model: nn.Module) -> int:
    """The widest LoRA rank of the model's adapters when it is narrower than every projection it adapts (0 without
    LoRA, or when a rank is as wide as a projection and so cannot tell the adapters' matmuls from the base's)."""
    layers = lora_layers(model)
    if not layers:
        return 0
    rank = max(int(rank) for layer in layers for rank in layer.r.values())
    widest_needed = min(min(layer.base_layer.in_features, layer.base_layer.out_features) for layer in layers)
    return rank if rank < widest_needed else 0


def is_narrow_matmul(op: object, args: tuple[object, ...], narrow: int) -> bool:
    """A LoRA adapter's matmul: one of its weight's dimensions is the rank (lora_A's is in x r, lora_B's r x out; a
    base projection's are both wider). Recomputing one costs r x (in + out) per token, nothing beside the base's
    in x out; keeping lora_B's output would keep a projection-wide tensor per adapted layer."""
    if not narrow or op not in _matmuls():
        return False
    weight = args[2] if op is torch.ops.aten.addmm.default else args[1]
    return isinstance(weight, torch.Tensor) and weight.dim() == 2 and min(weight.shape) <= narrow


def _selective_policy(narrow: int = 0) -> Callable[..., object]:
    """Keep what is expensive to recompute (matmuls, attention); recompute elementwise ops (norms, SiLU, RoPE) and,
    under LoRA, the adapters' narrow matmuls (is_narrow_matmul)."""
    from torch.utils.checkpoint import CheckpointPolicy

    kept = _kept_ops()

    def policy(ctx: object, op: object, *args: object, **kwargs: object) -> object:
        if op in kept and not is_narrow_matmul(op, args, narrow):
            return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    return policy


def _every_other_matmul_policy(narrow: int = 0) -> Callable[..., object]:
    """torchtitan's op-level selective policy: `_selective_policy`, except that every second matmul of a layer's
    forward is recomputed in backward rather than kept (the 2nd, 4th, ...: in a Llama layer k, o and up of the seven
    projections), for about half of selective's matmul outputs at the cost of those three matmuls again.

    As torchtitan/distributed/activation_checkpoint.py's SelectiveAC._wrap_block (`_get_custom_policy`: a count per
    call of the wrapped block, one for its forward and one for its recompute, so the recompute takes the same
    decisions; `func in mm_ops and meta[mm_count_key] % 2 == 0` recomputes), read at pytorch/torchtitan b5bcd76.
    torchtitan counts aten.mm and aten.linear; here the count takes every matmul a Linear can become (_matmuls), so a
    projection with a bias (Qwen2's q, k, v: addmm) or under FP8 (_scaled_mm) still takes its turn. LoRA's narrow
    matmuls are always recomputed and take no turn, so the base projections keep theirs.
    """
    from torch.utils.checkpoint import CheckpointPolicy

    counts = {False: 0, True: 0}  # matmuls seen so far in this call's forward and in its recompute
    matmuls = _matmuls()
    selective = _selective_policy(narrow)

    def policy(ctx: Any, op: object, *args: object, **kwargs: object) -> object:
        if op in matmuls and not is_narrow_matmul(op, args, narrow):
            counts[ctx.is_recompute] += 1
            if counts[ctx.is_recompute] % 2 == 0:
                return CheckpointPolicy.PREFER_RECOMPUTE
        return selective(ctx, op, *args, **kwargs)

    return policy


def _contexts(every_other: bool, narrow: int) -> Callable[[], tuple[object, object]]:
    """checkpoint_wrapper's context_fn: called once per call of a wrapped layer, so each call's policy counts from
    zero."""
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    def contexts() -> tuple[object, object]:
        policy = _every_other_matmul_policy(narrow) if every_other else _selective_policy(narrow)
        return create_selective_checkpoint_contexts(policy)

    return contexts


def apply_activation_checkpointing(model: nn.Module, mode: str) -> None:
    """Wrap each decoder layer so its activations are recomputed in backward: all of them (full), the cheap ones
    (selective), or the cheap ones and every second matmul (selective-mm); under LoRA the selective modes also
    recompute the adapters' narrow matmuls."""
    if mode == "none":
        return
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    narrow = narrow_width(model)
    layers = decoder_layers(model)
    for index, layer in enumerate(layers):
        if mode == "full":
            layers[index] = checkpoint_wrapper(layer, preserve_rng_state=False)
        else:
            context_fn = _contexts(mode == "selective-mm", narrow)
            layers[index] = checkpoint_wrapper(layer, context_fn=context_fn, preserve_rng_state=False)


def apply_fp8(model: nn.Module) -> None:
    """Swap the decoder layers' linear layers for torchao's FP8 training linears (dims divisible by 16).

    With FP8 all-gather FSDP2 gathers the weights already cast to FP8, half the bytes of bf16; their scales are
    computed for all layers at once after each optimizer step (`precompute_fp8_scales`), in one all-reduce
    (torchao.float8: Float8LinearConfig.enable_fsdp_float8_all_gather, precompute_float8_dynamic_scale_for_fsdp).
    """
    # torchao is in the GPU image only (requirements-trainer-gpu.txt), not in the environment the checker reads.
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training  # pyright: ignore[reportMissingImports]

    def wanted(module: nn.Module, name: str) -> bool:
        return isinstance(module, nn.Linear) and module.in_features % 16 == 0 and module.out_features % 16 == 0

    config = Float8LinearConfig(enable_fsdp_float8_all_gather=True)
    for layer in decoder_layers(model):
        convert_to_float8_training(layer, config=config, module_filter_fn=wanted)


def precompute_fp8_scales(model: nn.Module) -> None:
    """After each optimizer step under --fp8: the FP8 weights' scales for the next all-gathers."""
    from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp  # pyright: ignore[reportMissingImports]

    precompute_float8_dynamic_scale_for_fsdp(model)


def apply_compile(model: nn.Module) -> None:
    """torch.compile each decoder layer in place (parameter names stay unchanged, so checkpoints do too).

    fullgraph=True: each layer is one graph, or compiling fails loudly, instead of quietly running the pieces
    between graph breaks eagerly.
    """
    for layer in decoder_layers(model):
        layer.compile(fullgraph=True)


def sum_gradients(module: FSDPModule, device_type: str) -> None:
    """Reduce gradients as plain sums (the loss is already divided by the global batch's token count, so the sum
    over ranks is the global mean), point to point on gloo.

    A sum needs no division pass over the gradients (gloo runs FSDP's default AVG as a sum and a division of the
    whole buffer), and gloo has no PREMUL_SUM, which FSDP uses for any other divide factor
    (`_get_gradient_divide_factors` in torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py).
    """
    module.set_gradient_divide_factor(1.0)
    module.set_force_sum_reduction_for_comms(True)
    if device_type == "cpu":
        module.set_custom_reduce_scatter(PairwiseReduceScatter())


def embedding_by_rows(mesh: DeviceMesh, tokens_per_rank: int, vocab_size: int) -> bool:
    """Whether the input embedding is sharded by vocabulary rows (trainer/parallel/embedding.py) rather than an FSDP
    unit.

    By rows, every rank receives every rank's token embeddings in forward and their gradients in backward:
    mesh size x tokens per rank rows each way. As a unit, it gathers the table and reduce-scatters its gradient:
    vocab size rows each way. Rows win only while fewer tokens than the table's rows are in flight, as on small
    CPU runs (2 ranks x 256 tokens against 32000 rows); at GPU scale (8 x 4096 tokens per micro step on one p5 node,
    more on several) the unit moves less and holds less. Replicated meshes always use the unit.
    """
    return mesh.ndim == 1 and mesh.size() * tokens_per_rank < vocab_size


def apply_fsdp(
    model: nn.Module,
    mesh: DeviceMesh,
    mp_policy: MixedPrecisionPolicy,
    reshard_after_forward: bool,
    tokens_per_rank: int,
) -> None:
    """Shard each decoder layer as its own unit (one all-gather per layer; the last one kept gathered from its forward
    to its backward), the input embedding by vocabulary rows or as one more unit, the final norm with the output layer
    as another, then the root (which then holds no parameters of its own).

    - When fewer tokens than vocabulary rows are in flight on a 1-D mesh (embedding_by_rows), the embedding is
      never gathered: each rank looks up the tokens in its rows and the ranks exchange token embeddings and their
      gradients instead (trainer/parallel/embedding.py). Otherwise it is an FSDP unit, resharded after forward and not
      gathered again in backward (set_unshard_in_backward: its backward needs the token ids and its output's
      gradient, never its weight).
    - The output layer runs last in forward and first in backward: it stays gathered in between (gathering it
      again at once would only cost time), and its gradients are reduce-scattered as soon as its backward is done
      rather than with the embedding's at the end of the step.
    With tied embeddings the two share one weight, which must be one unit: the root holds it, gathered throughout.
    """
    layers = decoder_layers(model)
    for index, layer in enumerate(layers):
        # The last layer's backward comes first, right after the output layer's: resharded after its forward, it
        # would be all-gathered again at once (torchtitan's apply_fsdp keeps it gathered too).
        last = index == len(layers) - 1
        fully_shard(layer, mesh=mesh, mp_policy=mp_policy, reshard_after_forward=reshard_after_forward and not last)
    # A transformers PreTrainedModel: nn.Module's type does not show its embedding accessors.
    hf_model: Any = model
    embeddings, output = hf_model.get_input_embeddings(), hf_model.get_output_embeddings()
    ignored: set[nn.Parameter] = set()
    if output is not None and output.weight is not embeddings.weight:
        if embedding_by_rows(mesh, tokens_per_rank, embeddings.num_embeddings):
            embeddings = VocabShardedEmbedding(embeddings, mesh, mp_policy.param_dtype)
            hf_model.set_input_embeddings(embeddings)
            ignored.add(embeddings.weight)
        else:
            fully_shard(embeddings, mesh=mesh, mp_policy=mp_policy, reshard_after_forward=reshard_after_forward)
            embeddings.set_unshard_in_backward(False)
        fully_shard([final_norm(model), output], mesh=mesh, mp_policy=mp_policy, reshard_after_forward=False)
    fully_shard(model, mesh=mesh, mp_policy=mp_policy, reshard_after_forward=False, ignored_params=ignored or None)
    for module in model.modules():
        if isinstance(module, FSDPModule):
            sum_gradients(module, mesh.device_type)


def mixed_precision_policy(name: str) -> MixedPrecisionPolicy:
    """Compute in the chosen dtype; gradients are reduced (and parameters kept) in fp32."""
    return MixedPrecisionPolicy(param_dtype=TORCH_DTYPES[name], reduce_dtype=torch.float32)


def parallelize(model: nn.Module, config: ParallelConfig, mesh: DeviceMesh, tokens_per_rank: int) -> nn.Module:
    """Order matters: activation checkpointing and FP8 change the layers, compile traces those layers, and
    sharding comes last, per layer before the root, so each layer's parameters form their own group; a bf16
    all-reduce across replicas then changes the group the sharded units reduce over."""
    apply_activation_checkpointing(model, config.activation_checkpointing)
    if config.fp8:
        apply_fp8(model)
    if config.compile:
        apply_compile(model)
    # NO_SHARD has nothing to reshard (shard dim 1); SHARD_GRAD_OP keeps parameters gathered until backward.
    reshard = config.sharding_strategy in ("FULL_SHARD", "HYBRID_SHARD")
    apply_fsdp(model, mesh, mixed_precision_policy(config.mixed_precision), reshard, tokens_per_rank)
    if config.all_reduce_dtype == "bf16":
        if config.sharding_strategy != "HYBRID_SHARD":  # validate() refuses it first; never a quiet fp32 run
            raise ValueError(f"--all-reduce-dtype bf16 needs HYBRID_SHARD, not {config.sharding_strategy}")
        apply_bf16_all_reduce(model, mesh)
    return model
