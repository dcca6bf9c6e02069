"""Process groups the trainer's tests hand to code that takes one."""

from __future__ import annotations

from typing import cast

import torch.distributed as dist

# None: torch.distributed's default group, which the checkpointer's collectives then use (a world of one in the tests).
DEFAULT_GROUP = cast(dist.ProcessGroup, None)
