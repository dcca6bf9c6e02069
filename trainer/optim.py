"""AdamW and the learning-rate schedule (warmup, then cosine, linear or constant)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial

import torch
from torch import nn

from trainer.base.flags.config import OptimConfig

ADAM_BETAS = (0.9, 0.95)  # the Llama 2 paper's values (Touvron et al. 2023, section 2.2)


def build_optimizer(model: nn.Module, config: OptimConfig) -> torch.optim.AdamW:
    """Weight decay on matrices only; norm weights (1-D) are left alone. Only the parameters that require a
    gradient: under LoRA the adapters, not the frozen base (no optimizer state for it).

    The fused implementation (one kernel over every tensor of a group, no temporaries) wherever torch has it for
    the parameters' device, CPU and CUDA included: torch otherwise picks foreach on CUDA, and on CPU a Python loop
    over the tensors, which with this trainer's ~10 element-wise passes per tensor takes 3 to 4 times the CPU time
    of the fused kernel (docs/performance.md).
    """
    trained = [p for p in model.parameters() if p.requires_grad]
    matrices = [p for p in trained if p.ndim >= 2]
    vectors = [p for p in trained if p.ndim < 2]
    groups = [{"params": matrices, "weight_decay": config.weight_decay}, {"params": vectors, "weight_decay": 0.0}]
    fused = uses_fused_kernel(matrices + vectors)
    return torch.optim.AdamW(groups, lr=config.lr, betas=ADAM_BETAS, eps=1e-8, fused=fused)


def uses_fused_kernel(params: Sequence[torch.Tensor]) -> bool:
    """Whether torch has a fused AdamW kernel for every parameter's device and dtype."""
    from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

    devices = _get_fused_kernels_supported_devices()
    return bool(params) and all(p.device.type in devices and torch.is_floating_point(p) for p in params)


def lr_factor(step_index: int, config: OptimConfig, total_steps: int) -> float:
    """Multiplier of --lr for optimizer step `step_index` (0-based).

    Warmup rises linearly to 1 at the last warmup step; decay then goes from 1 at the first step after warmup
    to min_lr/lr at the last step.
    """
    warmup = config.warmup_steps
    if step_index < warmup:
        return (step_index + 1) / warmup
    if config.lr_schedule == "constant":
        return 1.0
    floor = (config.min_lr or 0.0) / config.lr
    progress = min(1.0, (step_index - warmup) / max(1, total_steps - warmup - 1))
    if config.lr_schedule == "linear":
        return floor + (1.0 - floor) * (1.0 - progress)
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def build_scheduler(
    optimizer: torch.optim.Optimizer, config: OptimConfig, total_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, partial(lr_factor, config=config, total_steps=total_steps))
