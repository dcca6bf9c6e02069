"""DCP readers that count the bytes they read: the stored length of every item they load, as DCP's FileSystemReader
reads it (trainer/checkpoint/load.py reports the total)."""

from __future__ import annotations

from typing import Any

import torch.distributed.checkpoint as dcp


class Counting(dcp.FileSystemReader):
    """Counts the bytes a DCP file-system reader reads (a mixin before FileSystemReader or a subclass of it)."""

    bytes_read = 0

    def read_data(self, plan: Any, planner: Any) -> Any:
        # storage_data: what read_metadata (FileSystemReader) found in .metadata, the stored extent of every item.
        self.bytes_read += sum(self.storage_data[item.storage_index].length for item in plan.items)
        return super().read_data(plan, planner)


class CountingReader(Counting):
    """DCP's reader of a checkpoint directory, counting."""
