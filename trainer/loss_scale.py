"""Dynamic loss scaling for fp16 compute (bf16 and fp32 need none: their exponent range matches fp32's).

fp16 gradients of small magnitude underflow to zero, so the loss is multiplied by a large scale before backward
and the gradients divided by it afterwards. An overflow shows as a non-finite global gradient norm, which every
rank computes identically (clip_grad_norm_ reduces over the mesh), so all ranks skip that step and halve the scale
together without an extra collective. After GROWTH_INTERVAL clean steps the scale doubles again (the schedule of
Micikevicius et al. 2018, "Mixed Precision Training", section 3.2).
"""

from __future__ import annotations

import math

import torch

INITIAL_SCALE = 2.0**16
GROWTH_INTERVAL = 2000


class LossScaler:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.scale = INITIAL_SCALE if enabled else 1.0
        self.clean_steps = 0

    def scaled(self, loss: torch.Tensor) -> torch.Tensor:
        return loss * self.scale if self.enabled else loss

    @torch.no_grad()
    def unscale(self, parameters: list[torch.nn.Parameter]) -> None:
        """Divide every gradient by the scale in one foreach operation: on a GPU a few fused kernel launches for all
        gradients instead of one per parameter (torch.amp.GradScaler unscales the same way, with
        torch._amp_foreach_non_finite_check_and_unscale_, torch/amp/grad_scaler.py)."""
        if self.enabled:
            grads = [param.grad for param in parameters if param.grad is not None]
            if grads:
                torch._foreach_mul_(grads, 1.0 / self.scale)

    def update(self, grad_norm: float) -> bool:
        """Record the step's outcome; False means the gradients overflowed and the step must be skipped."""
        if not self.enabled:
            return True
        if not math.isfinite(grad_norm):
            self.scale /= 2.0
            self.clean_steps = 0
            return False
        self.clean_steps += 1
        if self.clean_steps % GROWTH_INTERVAL == 0:
            self.scale *= 2.0
        return True

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"scale": torch.tensor(self.scale, dtype=torch.float64), "clean_steps": torch.tensor(self.clean_steps)}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.scale, self.clean_steps = float(state["scale"]), int(state["clean_steps"])
