"""fp16 loss scaling: overflowing steps are skipped and the scale adapts; other precisions are untouched."""

from __future__ import annotations

import math
from typing import Any

import torch

from trainer.loss_scale import GROWTH_INTERVAL, INITIAL_SCALE, LossScaler


def _grad(param: torch.nn.Parameter) -> torch.Tensor:
    assert param.grad is not None, "the backward pass left no gradient"
    return param.grad


def test_disabled_scaler_changes_nothing() -> None:
    scaler = LossScaler(enabled=False)
    loss = torch.tensor(2.0)
    assert scaler.scaled(loss) is loss
    assert scaler.update(math.inf) is True and scaler.scale == 1.0


def test_gradients_are_unscaled_exactly() -> None:
    scaler = LossScaler(enabled=True)
    param = torch.nn.Parameter(torch.ones(3))
    scaler.scaled((param * 2).sum()).backward()
    assert torch.equal(_grad(param), torch.full((3,), 2.0 * INITIAL_SCALE))
    scaler.unscale([param])
    assert torch.equal(_grad(param), torch.full((3,), 2.0))


def test_unscaling_is_one_foreach_operation_over_all_gradients() -> None:
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[str] = []

        def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
            self.seen.append(func.__name__)
            return func(*args, **(kwargs or {}))

    scaler = LossScaler(enabled=True)
    params = [torch.nn.Parameter(torch.ones(3)) for _ in range(5)]
    for param in params:
        param.grad = torch.full((3,), INITIAL_SCALE)
    with Ops() as ops:
        scaler.unscale(params)
    assert ops.seen == ["_foreach_mul_.Scalar"]
    assert all(torch.equal(_grad(param), torch.ones(3)) for param in params)


def test_an_overflow_skips_the_step_and_halves_the_scale() -> None:
    scaler = LossScaler(enabled=True)
    assert scaler.update(float("nan")) is False
    assert scaler.update(math.inf) is False
    assert scaler.scale == INITIAL_SCALE / 4


def test_the_scale_grows_after_a_run_of_clean_steps() -> None:
    scaler = LossScaler(enabled=True)
    for _ in range(GROWTH_INTERVAL - 1):
        assert scaler.update(1.0)
    assert scaler.scale == INITIAL_SCALE
    scaler.update(1.0)
    assert scaler.scale == 2 * INITIAL_SCALE


def test_state_round_trips() -> None:
    scaler, restored = LossScaler(enabled=True), LossScaler(enabled=True)
    scaler.update(math.inf)
    scaler.update(1.0)
    restored.load_state_dict(scaler.state_dict())
    assert (restored.scale, restored.clean_steps) == (scaler.scale, scaler.clean_steps)


def test_a_skipped_fp16_step_moves_neither_the_weights_nor_the_schedule() -> None:
    """trainer/train.py take_step: the warmup and decay count the steps taken, so an overflow costs no step of the
    schedule; a step taken moves both."""
    from trainer.base.flags.config import OptimConfig
    from trainer.checkpoint.checkpointer import Progress, TrainState
    from trainer.optim import build_scheduler
    from trainer.train import take_step

    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1.0)
    scheduler = build_scheduler(optimizer, OptimConfig(lr=1.0, warmup_steps=4), total_steps=10)
    state = TrainState(model, optimizer, scheduler, LossScaler(enabled=True), Progress())
    for param in model.parameters():
        param.grad = torch.ones_like(param)
    before, lr = [p.detach().clone() for p in model.parameters()], optimizer.param_groups[0]["lr"]
    assert take_step(state, torch.tensor(math.inf)) is False
    assert scheduler.last_epoch == 0 and optimizer.param_groups[0]["lr"] == lr
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))
    assert take_step(state, torch.tensor(1.0)) is True
    assert scheduler.last_epoch == 1 and optimizer.param_groups[0]["lr"] > lr
    assert not all(torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))
