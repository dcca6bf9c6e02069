"""What the trainer's speed choices cost or save in the throughput model: each activation checkpointing mode's
recompute, torch.compile's element-wise fusion and a bf16 all-reduce across HYBRID_SHARD's replicas."""

from __future__ import annotations

from dataclasses import replace

import pytest

import sizing.throughput
from sizing.catalog import CATALOG
from sizing.estimate import SizingError, make_job
from sizing.memory import Job
from sizing.throughput import default_mfu, estimate_throughput, recompute_share, recomputed_matmul_share
from trainer.base.flags.config import parse_args
from trainer.base.model.presets import PRESETS

P5 = CATALOG["p5.48xlarge"]
LLAMA2_7B = PRESETS["llama2-7b"]


def reference_job(**changes: object) -> Job:
    """The p5 stacks' job: Llama 2 7B, seq 4096, batch 1 per GPU, HYBRID_SHARD, one micro step per step."""
    return replace(Job(LLAMA2_7B, 4096, 1, "HYBRID_SHARD"), **changes)  # pyright: ignore[reportArgumentType]


def step_s(job: Job, nodes: int = 16) -> float:
    return estimate_throughput(job, P5, nodes).step_s


def test_checkpointing_modes_cost_in_the_order_of_what_they_recompute() -> None:
    none, selective, every_other, full = (
        step_s(reference_job(activation_checkpointing=mode)) for mode in ("none", "selective", "selective-mm", "full")
    )
    assert none == selective < every_other < full


def test_selective_mm_recomputes_k_o_and_up_at_the_matmuls_speed() -> None:
    """Llama 2 7B (h = kv = 4096, I = 11008, seq 4096): k, o and up are 2 x (h^2 + h^2 + hI) FLOPs a token of the
    layer's 2 x (4h^2 + 3hI) + 4hT."""
    h, i, t = 4096, 11008, 4096
    assert recomputed_matmul_share(LLAMA2_7B, t) == pytest.approx(
        (2 * h * h + h * i) / (4 * h * h + 3 * h * i + 2 * h * t)
    )
    width = sizing.throughput.elementwise_width("H100-SXM")
    expected = h / (h + width) * recomputed_matmul_share(LLAMA2_7B, t)
    assert recompute_share(reference_job(activation_checkpointing="selective-mm"), "H100-SXM") == pytest.approx(
        expected
    )
    assert recompute_share(reference_job(activation_checkpointing="full"), "H100-SXM") == 1.0


def test_compile_speeds_h100_up_as_torchtitans_llama_31_8b_runs() -> None:
    """1.157x and 1.162x the tokens/s with compile on 8 and 128 H100 (torchtitan's benchmark, Tables 1 and 3)."""
    ratio = default_mfu("H100-SXM", 4096, compiled=True) / default_mfu("H100-SXM", 4096)
    assert 1.15 < ratio < 1.17
    assert step_s(reference_job(compile=True)) < step_s(reference_job())


def test_bf16_all_reduce_halves_the_time_of_the_all_reduce_across_replicas(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no latency terms, a collective's time is its bytes over the link. One micro step per optimizer step
    all-reduces on it; with two, on one of the two: twice the difference of their mean communication is the
    all-reduce's."""
    monkeypatch.setattr(sizing.throughput, "COLLECTIVE_BASE_S", 0.0)
    monkeypatch.setattr(sizing.throughput, "HOP_S", {"nvlink": 0.0, "network": 0.0})

    def all_reduce_s(dtype: str) -> float:
        job = reference_job(all_reduce_dtype=dtype)
        once, every_other = (estimate_throughput(replace(job, grad_accum=n), P5, 16).communication_s for n in (1, 2))
        return 2 * (once - every_other)

    assert all_reduce_s("fp32") > 0
    assert all_reduce_s("bf16") == pytest.approx(all_reduce_s("fp32") / 2)


def test_bf16_all_reduce_is_sized_for_hybrid_shard_only() -> None:
    flags = ["--seq-len", "4096", "--batch-size", "1", "--all-reduce-dtype", "bf16"]
    job = make_job(LLAMA2_7B, parse_args([*flags, "--sharding-strategy", "HYBRID_SHARD"]), gpus=16)
    assert job.all_reduce_dtype == "bf16"
    refused = "--all-reduce-dtype bf16: only with --sharding-strategy HYBRID_SHARD \\(not FULL_SHARD\\)"
    with pytest.raises(SizingError, match=refused):
        make_job(LLAMA2_7B, parse_args([*flags, "--sharding-strategy", "FULL_SHARD"]), gpus=16)
