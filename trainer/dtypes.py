"""The torch dtype of each precision name the trainer's flags take (trainer/base/units.py holds their sizes)."""

from __future__ import annotations

import torch

TORCH_DTYPES: dict[str, torch.dtype] = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
