"""The optimizer: AdamW with weight decay on matrices only, through torch's fused kernel where torch has one."""

from __future__ import annotations

import torch
from torch import nn

from trainer.base.flags.config import parse_args
from trainer.optim import build_optimizer


def optimizer_for(model: nn.Module) -> torch.optim.AdamW:
    return build_optimizer(model, parse_args(["--weight-decay", "0.1"]).optim)


def test_cpu_parameters_take_the_fused_kernel() -> None:
    """On CPU torch's default is a Python loop over the tensors, several times slower (docs/performance.md)."""
    optimizer = optimizer_for(nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4)))
    assert all(group["fused"] for group in optimizer.param_groups)


def test_the_fused_step_matches_the_loop() -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8))
    reference = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8))
    reference.load_state_dict(model.state_dict())
    fused = optimizer_for(model)
    loop = torch.optim.AdamW(
        [
            {"params": [p for p in reference.parameters() if p.ndim >= 2], "weight_decay": 0.1},
            {"params": [p for p in reference.parameters() if p.ndim < 2], "weight_decay": 0.0},
        ],
        lr=fused.defaults["lr"],
        betas=fused.defaults["betas"],
        eps=fused.defaults["eps"],
        foreach=False,
    )
    inputs = torch.randn(3, 8)
    for _ in range(3):
        for net, optimizer in ((model, fused), (reference, loop)):
            optimizer.zero_grad()
            net(inputs).square().sum().backward()
            optimizer.step()
    for ours, theirs in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-7)


def test_weight_decay_applies_to_matrices_only() -> None:
    optimizer = optimizer_for(nn.Sequential(nn.Linear(4, 4, bias=False), nn.LayerNorm(4, bias=False)))
    matrices, vectors = optimizer.param_groups
    assert [p.ndim for p in matrices["params"]] == [2] and matrices["weight_decay"] == 0.1
    assert [p.ndim for p in vectors["params"]] == [1] and vectors["weight_decay"] == 0.0
