"""Single-tensor all-gather and reduce-scatter on every torch the trainer supports (requirements-trainer.txt's floor,
2.11, through 2.13).

torch 2.13 adds `dist.all_gather_single` and `dist.reduce_scatter_single` and deprecates the names 2.11 and 2.12 have,
`all_gather_into_tensor` and `reduce_scatter_tensor`, which 2.13 keeps as calls of the new ones with the same
arguments (torch/distributed/distributed_c10d.py). The new name where it exists (no FutureWarning), else the old:
the same collective, the same result.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

Group = Any
"""A process group, or None for the default one: torch's collectives take it untyped (new_subgroups' annotation, for
one, names the int of a rank outside every group too)."""


def all_gather_single(output: torch.Tensor, input: torch.Tensor, group: Group = None) -> None:
    """Every rank's `input` (same size on all), concatenated in rank order into `output`."""
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    gather(output, input, group=group)


def reduce_scatter_single(output: torch.Tensor, input: torch.Tensor, group: Group = None) -> None:
    """The sum over ranks of `input` (same size on all), this rank's chunk of it into `output`."""
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    scatter(output, input, group=group)
