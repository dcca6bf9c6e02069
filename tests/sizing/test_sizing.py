"""The sizing model's rules: how memory and throughput move with nodes, strategies and checkpointing."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sizing.catalog import CATALOG
from sizing.estimate import SizingError, make_job, size_job
from sizing.memory import (
    FP32,
    MOMENTS,
    TERMS,
    Job,
    Ranks,
    adapter_shapes,
    layer_parameter_shapes,
    memory_moments,
    numel,
    peak_memory,
    root_parameter_shapes,
    shard_numel,
)
from sizing.throughput import estimate_throughput, scaling_efficiency
from trainer.base.flags.config import parse_args
from trainer.base.flags.options import with_values
from trainer.base.metrics.figures import training_flops_per_token
from trainer.base.model.presets import PRESETS

P5, P4DE = CATALOG["p5.48xlarge"], CATALOG["p4de.24xlarge"]
LLAMA_7B = PRESETS["llama2-7b"]

FLAGS_7B = ["--seq-len", "4096", "--batch-size", "1"]  # seq 4096, batch 1 per GPU


def job_7b(**changes: object) -> Job:
    return replace(Job(LLAMA_7B, seq_len=4096), **changes)


def optimizer_step(job: Job, ranks: Ranks) -> dict[str, int]:
    return memory_moments(job, ranks)[MOMENTS.index("optimizer step")].terms


@pytest.mark.parametrize("shape", PRESETS.values(), ids=PRESETS.keys())
def test_the_parameter_layout_counts_every_parameter(shape) -> None:
    layers = shape.num_layers * numel(layer_parameter_shapes(shape))
    assert layers + numel(root_parameter_shapes(shape)) == shape.num_parameters


def test_shards_are_padded_to_equal_chunks_like_fsdp() -> None:
    assert shard_numel([(10, 3)], 4) == 3 * 3  # rows 10 over 4 ranks: chunks of 3
    assert shard_numel([(8, 3)], 4) == 2 * 3


def test_every_moment_reports_every_term() -> None:
    for moment in memory_moments(job_7b(), Ranks(8, 8)):
        assert tuple(moment.terms) == TERMS


def test_sharded_state_is_16_bytes_per_parameter_over_the_shard_group() -> None:
    terms = optimizer_step(job_7b(), Ranks(16, 8))
    state = terms["parameters"] + terms["gradients"] + terms["optimizer_states"]
    assert state == pytest.approx(16 * LLAMA_7B.num_parameters / 16, rel=1e-3)


def test_full_shard_state_halves_with_twice_the_ranks_but_hybrid_shard_stays_per_node() -> None:
    full = [optimizer_step(job_7b(), Ranks(8 * n, 8))["optimizer_states"] for n in (1, 2)]
    hybrid = [
        optimizer_step(job_7b(sharding_strategy="HYBRID_SHARD"), Ranks(8 * n, 8))["optimizer_states"] for n in (1, 2)
    ]
    assert full[1] == pytest.approx(full[0] / 2, rel=1e-3)
    assert hybrid[0] == hybrid[1]


def test_no_shard_keeps_the_whole_model_on_every_rank() -> None:
    terms = optimizer_step(job_7b(sharding_strategy="NO_SHARD"), Ranks(64, 8))
    assert terms["parameters"] == FP32 * LLAMA_7B.num_parameters


def test_shard_grad_op_holds_every_layer_gathered_through_the_backward_start() -> None:
    """FULL_SHARD keeps only the last layer gathered from its forward to its backward."""
    full = peak_memory(job_7b(), Ranks(8, 8))
    grad_op = peak_memory(job_7b(sharding_strategy="SHARD_GRAD_OP"), Ranks(8, 8))
    gathered_layers = (LLAMA_7B.num_layers - 1) * 2 * numel(layer_parameter_shapes(LLAMA_7B))  # bf16 copies
    assert grad_op.terms["unsharded_parameters"] - full.terms["unsharded_parameters"] == pytest.approx(
        gathered_layers, rel=1e-3
    )


def test_activation_checkpointing_trades_activations_for_recompute() -> None:
    none, selective, full = (
        peak_memory(job_7b(activation_checkpointing=m), Ranks(8, 8)) for m in ("none", "selective", "full")
    )
    assert none.total > selective.total > full.total
    slower = estimate_throughput(job_7b(activation_checkpointing="full"), P5, 1)
    assert slower.tokens_per_second < estimate_throughput(job_7b(), P5, 1).tokens_per_second


def test_gradient_accumulation_keeps_the_gradient_shards_through_forward_and_backward() -> None:
    loss_backward = memory_moments(job_7b(grad_accum=4), Ranks(8, 8))[0]
    assert loss_backward.terms["gradients"] == loss_backward.terms["parameters"]


def test_activations_grow_with_tokens() -> None:
    short, long = (peak_memory(job_7b(seq_len=s), Ranks(8, 8)).terms["activations"] for s in (2048, 4096))
    assert long == pytest.approx(2 * short, rel=0.01)


def test_one_node_is_the_baseline_of_scaling_efficiency() -> None:
    assert scaling_efficiency(job_7b(), P5, 1) == 1.0
    assert scaling_efficiency(job_7b(sharding_strategy="HYBRID_SHARD"), P5, 2) <= 1.0


def test_per_gpu_throughput_does_not_rise_with_nodes() -> None:
    per_gpu = [estimate_throughput(job_7b(), P4DE, n).tokens_per_second_per_gpu for n in (1, 2, 4, 8, 16)]
    assert per_gpu == sorted(per_gpu, reverse=True)


def test_the_faster_network_and_chip_scale_better() -> None:
    hybrid = job_7b(sharding_strategy="HYBRID_SHARD")
    assert scaling_efficiency(hybrid, P5, 16) > scaling_efficiency(hybrid, P4DE, 16)


def test_mfu_is_the_trainers_definition() -> None:
    estimate = estimate_throughput(job_7b(), P5, 2)
    flops = training_flops_per_token(LLAMA_7B, 4096)
    assert estimate.mfu == pytest.approx(estimate.tokens_per_second_per_gpu * flops / P5.peak_bf16_flops_per_gpu)


def test_gradient_accumulation_comes_from_the_global_batch() -> None:
    job = make_job(LLAMA_7B, parse_args([*FLAGS_7B, "--global-batch-size", "128"]), gpus=8)
    assert job.grad_accum == 16
    throughput = size_job(job, P5, 1).throughput
    assert throughput is not None
    assert throughput.step_s == pytest.approx(16 * throughput.micro_step_s)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"data.seq_len": 8192}, "--seq-len 8192: exceeds the model's max_position_embeddings 4096"),
        ({"schedule.global_batch_size": 12}, "--global-batch-size 12: not a multiple of --batch-size x the world"),
        ({"parallel.sharding_strategy": "ZERO3"}, "--sharding-strategy ZERO3: must be one of FULL_SHARD"),
        ({"schedule.batch_size": 0}, "--batch-size 0: must be positive"),
    ],
)
def test_bad_job_inputs_name_the_flag_and_the_value(changes: dict, message: str) -> None:
    with pytest.raises(SizingError, match=message):
        make_job(LLAMA_7B, with_values(parse_args(FLAGS_7B), changes), gpus=8)


def test_zero_nodes_cannot_be_sized() -> None:
    with pytest.raises(SizingError, match="0 nodes"):
        size_job(job_7b(), P5, 0)


def test_accumulation_all_reduces_across_replicas_once_per_step() -> None:
    """HYBRID_SHARD's cross-node all-reduce is paid on the last micro step only (trainer/train.py), so its share of a
    micro step falls as accumulation grows; FULL_SHARD has none and stays the same."""
    hybrid = job_7b(sharding_strategy="HYBRID_SHARD")
    once = estimate_throughput(hybrid, P5, 2)
    accumulating = estimate_throughput(replace(hybrid, grad_accum=8), P5, 2)
    assert accumulating.communication_s < once.communication_s
    assert accumulating.step_s < 8 * once.step_s
    full = job_7b()
    assert estimate_throughput(replace(full, grad_accum=8), P5, 2).step_s == pytest.approx(
        8 * estimate_throughput(full, P5, 2).step_s
    )


LLAMA31_70B = PRESETS["llama3.1-70b"]


def lora_70b(rank: int) -> Job:
    """Llama 3.1 70B, seq 4096, batch 1 per GPU, full activation checkpointing (Pulumi.p5-1-llama70b-lora.yaml)."""
    return make_job(
        LLAMA31_70B, parse_args([*FLAGS_7B, "--activation-checkpointing", "full", "--lora-rank", str(rank)]), gpus=8
    )


def test_llama31_70b_with_lora_fits_one_p5_node_and_full_fine_tuning_does_not() -> None:
    lora, full = size_job(lora_70b(16), P5, 1), size_job(lora_70b(0), P5, 1)
    assert lora.fits and not full.fits
    assert lora.needed_bytes < 40 * 2**30 < 150 * 2**30 < full.needed_bytes


def test_lora_keeps_the_frozen_base_in_the_compute_dtype_and_trains_only_the_adapters() -> None:
    """Per rank at the optimizer step: the base's shard in bf16, the adapters' in fp32 with fp32 gradients and two
    fp32 moments; nothing of the base has a gradient or optimizer state."""
    ranks, targets = Ranks(8, 8), ("q_proj", "v_proj")
    terms = optimizer_step(replace(job_7b(lora_rank=8), lora_targets=targets), ranks)
    h, q, kv = LLAMA_7B.hidden_size, LLAMA_7B.q_width, LLAMA_7B.kv_width
    assert adapter_shapes(LLAMA_7B, 8, targets) == [(8, h), (q, 8), (8, h), (kv, 8)]
    adapters = LLAMA_7B.num_layers * shard_numel(adapter_shapes(LLAMA_7B, 8, targets), 8)
    base = LLAMA_7B.num_layers * shard_numel(layer_parameter_shapes(LLAMA_7B), 8)
    base += shard_numel(root_parameter_shapes(LLAMA_7B)[:2], 8) + shard_numel([(h, 1)], 8)
    assert terms["parameters"] == 2 * base + FP32 * adapters
    assert terms["gradients"] == FP32 * adapters
    assert terms["optimizer_states"] == 2 * FP32 * adapters


def test_lora_saves_the_adapters_r_wide_intermediates_and_does_less_work() -> None:
    full, lora = job_7b(), job_7b(lora_rank=16)
    saved = [memory_moments(job, Ranks(8, 8))[MOMENTS.index("loss")].terms["activations"] for job in (full, lora)]
    assert saved[1] - saved[0] == LLAMA_7B.num_layers * 4096 * 2 * 16 * 7  # bf16, 7 targets
    speeds = [estimate_throughput(job, P5, 1) for job in (full, lora)]
    assert speeds[1].compute_s < speeds[0].compute_s  # no weight gradients for the frozen base
    assert training_flops_per_token(LLAMA_7B, 4096, adapters=1) < training_flops_per_token(LLAMA_7B, 4096)
