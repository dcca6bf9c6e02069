"""--activation-checkpointing selective-mm (torchtitan's op-level policy: selective, with every second matmul
recomputed): the same losses as no checkpointing, sharded with FSDP2, with LoRA and under torch.compile's tracing.
What it keeps (less than selective) is measured in tests/sizing/trainer_memory/test_checkpointed_formula.py."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.nn import functional
from torch.utils.checkpoint import CheckpointPolicy

from trainer.base.flags.config import LoraConfig, ParallelConfig, TrainConfig
from trainer.base.model.source import resolve_model
from trainer.base.pod.env import DistEnv
from trainer.model.build import decoder_layers
from trainer.parallel.parallelize import (
    _every_other_matmul_policy,  # pyright: ignore[reportPrivateUsage]
    apply_activation_checkpointing,
)
from trainer.train import build_model

STEPS, BATCH, SEQ_LEN = 3, 2, 32


class Context:
    """What a selective policy reads of torch's checkpoint context."""

    def __init__(self, is_recompute: bool) -> None:
        self.is_recompute = is_recompute


def losses(mode: str, lora_rank: int = 0) -> list[float]:
    """The tiny preset sharded over a process group of one, trained for a few AdamW steps on fixed tokens."""
    config = TrainConfig(
        parallel=ParallelConfig(activation_checkpointing=mode, mixed_precision="fp32", device="cpu"),
        lora=LoraConfig(rank=lora_rank),
    )
    config.schedule.batch_size, config.data.seq_len = BATCH, SEQ_LEN
    mesh = init_device_mesh("cpu", (1,), mesh_dim_names=("dp_shard",))
    model, _ = build_model(
        resolve_model("tiny"), config, mesh, torch.device("cpu"), DistEnv(world_size=1, local_world_size=1),
        dist.group.WORLD,  # pyright: ignore[reportArgumentType]
    )  # fmt: skip
    if lora_rank:  # adapters start at zero (B = 0): move them first so they change the losses
        generator = torch.Generator().manual_seed(1)
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                local = parameter.to_local()  # pyright: ignore[reportAttributeAccessIssue]
                torch.nn.init.normal_(local, std=0.02, generator=generator)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    tokens = torch.randint(0, 256, (BATCH, SEQ_LEN + 1), generator=torch.Generator().manual_seed(0))
    found = []
    for _ in range(STEPS):
        logits = model(input_ids=tokens[:, :-1]).logits
        loss = functional.cross_entropy(logits.float().flatten(0, 1), tokens[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        found.append(loss.item())
    return found


@pytest.mark.usefixtures("world_of_one")
@pytest.mark.parametrize("lora_rank", [0, 4], ids=["full-fine-tuning", "lora"])
def test_selective_mm_trains_as_no_checkpointing(lora_rank: int) -> None:
    expected = losses("none", lora_rank)
    assert losses("selective-mm", lora_rank) == pytest.approx(expected, rel=1e-6)
    assert expected[-1] < expected[0]  # the steps train: a run that ignored the updates would not pass above


def test_every_second_matmul_is_recomputed_and_the_recompute_takes_the_same_turns() -> None:
    aten = torch.ops.aten
    policy = _every_other_matmul_policy()
    forward, recompute = Context(is_recompute=False), Context(is_recompute=True)
    projections = [aten.mm.default, aten.addmm.default, aten.mm.default, aten._scaled_mm.default, aten.mm.default]
    decisions = [policy(forward, op) for op in projections]
    assert decisions == [CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_RECOMPUTE] * 2 + [
        CheckpointPolicy.MUST_SAVE
    ]
    assert policy(forward, aten.silu.default) is CheckpointPolicy.PREFER_RECOMPUTE  # not a matmul: selective's
    assert policy(forward, aten.max.default) is CheckpointPolicy.MUST_SAVE
    assert [policy(recompute, op) for op in projections] == decisions  # its own count, from the start


def test_each_call_of_a_layer_counts_from_its_first_matmul() -> None:
    """checkpoint_wrapper calls the context function per call of the layer: a new policy, a new count."""
    first, second = _every_other_matmul_policy(), _every_other_matmul_policy()
    assert first(Context(False), torch.ops.aten.mm.default) is CheckpointPolicy.MUST_SAVE
    assert second(Context(False), torch.ops.aten.mm.default) is CheckpointPolicy.MUST_SAVE


def test_a_selective_mm_layer_compiles_as_one_graph_with_the_same_output_and_gradients() -> None:
    """apply_compile's fullgraph=True over the checkpoint wrapper: dynamo traces the policy (aot_eager: the
    tracing and the partition into forward and backward are the same as inductor's, without code generation)."""
    from trainer.model.build import build_meta_model, hf_config, init_buffers, init_weights

    config = hf_config(resolve_model("tiny"))
    model: Any = build_meta_model(config)
    model.to_empty(device="cpu")
    init_buffers(model, torch.device("cpu"))
    init_weights(model, seed=0, std=config.initializer_range)
    apply_activation_checkpointing(model, "selective-mm")
    layer = decoder_layers(model)[0]
    hidden = torch.randn(BATCH, SEQ_LEN, config.hidden_size, requires_grad=True)
    position_embeddings = model.model.rotary_emb(hidden, torch.arange(SEQ_LEN).unsqueeze(0))

    def output_and_gradient(run: Any) -> tuple[torch.Tensor, torch.Tensor]:
        hidden.grad = None
        output = run(hidden, position_embeddings=position_embeddings)
        output = output[0] if isinstance(output, tuple) else output
        output.square().sum().backward()
        assert hidden.grad is not None
        return output.detach(), hidden.grad.clone()

    eager = output_and_gradient(layer)
    compiled = output_and_gradient(torch.compile(layer, fullgraph=True, backend="aot_eager"))
    torch.testing.assert_close(compiled, eager)
