"""The stack's checkpoint file system as the AWS side makes it and the job mounts it: one shape for both.

infra/lustre.py fills it with the FSx for Lustre file system's outputs (Pulumi outputs); the job's component
resolves them and its pure builder (workloads/job/checkpoint_volume.py) writes the PersistentVolume from plain strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

# Covariant (the fields are read-only): a file system of outputs or of strings is one of Pulumi inputs.
Value = TypeVar("Value", covariant=True)


@dataclass(frozen=True)
class LustreFileSystem(Generic[Value]):
    """An FSx for Lustre file system for checkpoints, in the GPU nodes' AZ; Value is str or a Pulumi output."""

    file_system_id: Value
    dns_name: Value
    mount_name: Value
    capacity_gib: int
