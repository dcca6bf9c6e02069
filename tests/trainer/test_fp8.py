"""FP8 (torchao, CUDA only): refused without torch.compile, and its matmuls kept by selective checkpointing. The FP8
all-gather and its scales (trainer/parallel/parallelize.py apply_fp8, precompute_fp8_scales) need torchao and a GPU:
torchao is in the GPU image only (requirements-trainer-gpu.txt), not in the CPU test environment."""

from __future__ import annotations

import torch
from torch.utils.checkpoint import CheckpointPolicy

from trainer.base.flags.config import parse_args
from trainer.base.model.source import resolve_model
from trainer.base.pod.env import DistEnv
from trainer.parallel.parallelize import _selective_policy
from trainer.validate import validate


def errors_on_a_gpu(argv: list[str]) -> list[str]:
    config = parse_args(argv)
    return validate(config, DistEnv(), "cuda", resolve_model(config.model.name))


def test_fp8_without_compile_is_refused() -> None:
    assert "--fp8: needs --compile (without it FP8 training is slower than bf16)" in errors_on_a_gpu(["--fp8"])
    assert not [e for e in errors_on_a_gpu(["--fp8", "--compile"]) if "--compile" in e]


def test_selective_checkpointing_keeps_fp8_matmuls() -> None:
    assert _selective_policy()(None, torch.ops.aten._scaled_mm.default) == CheckpointPolicy.MUST_SAVE
    assert _selective_policy()(None, torch.ops.aten.mm.default) == CheckpointPolicy.MUST_SAVE
    assert _selective_policy()(None, torch.ops.aten.silu.default) == CheckpointPolicy.PREFER_RECOMPUTE
