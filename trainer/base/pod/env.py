"""The launch environment torchrun gives each worker, read without torch.

torchrun (and the Kubeflow PyTorchJob, which runs torchrun) sets RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE and TORCHELASTIC_RESTART_COUNT; the launcher (trainer/launch/launcher.py) adds the attempt id every
rank of a start agrees on (trainer/base/pod/attempt.py). A plain `python -m trainer` has none of them and is rank 0 of a
world of one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from trainer.base.pod.attempt import attempt_id, attempt_start


@dataclass(frozen=True)
class DistEnv:
    """Where this process sits in the job."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    restart_count: int = 0
    """How many times this node's agent restarted its workers after they failed (TORCHELASTIC_RESTART_COUNT): a
    count of this node's own, which other nodes' may differ from (trainer/base/pod/attempt.py)."""
    attempt: str = "restart-0"
    """This start of the workers, the same on every rank of it: the store prefix and the data cache's error markers
    are keyed by it."""
    group_world_size: int | None = None
    """The nodes of this start (torchrun's GROUP_WORLD_SIZE: the agents in the rendezvous, the same on every rank;
    torch elastic/agent/server/local_elastic_agent.py _start_workers); None without torchrun."""

    @property
    def is_leader(self) -> bool:
        """Rank 0 logs, writes metrics and serves Prometheus; the other ranks stay quiet."""
        return self.rank == 0

    @property
    def group_restarts(self) -> int:
        """Times the job's workers were started again in this run, the same on every rank: from the launcher's agreed
        attempt, else (a plain torchrun) this node's own restart count."""
        start = attempt_start(self.attempt)
        return start - 1 if start is not None else self.restart_count

    @property
    def num_nodes(self) -> int | None:
        """Number of nodes if every node runs the same number of workers, else None."""
        if self.world_size % self.local_world_size:
            return None
        return self.world_size // self.local_world_size

    @property
    def even_nodes(self) -> int | None:
        """The number of nodes when every node runs the same number of workers, else None, decided alike on every
        rank: WORLD_SIZE == GROUP_WORLD_SIZE x LOCAL_WORLD_SIZE holds on every rank or on none, since the world is the
        sum of the nodes' LOCAL_WORLD_SIZE. num_nodes cannot tell: with 4 workers on one node and 2 on another, the
        first node's ranks find 6 % 4 != 0, the second's 6 % 2 == 0 (uneven --nproc-per-node, or a node's GPUs lost)."""
        if self.group_world_size is None or self.world_size != self.group_world_size * self.local_world_size:
            return None
        return self.group_world_size

    @property
    def launched(self) -> bool:
        """True under torchrun (a process group needs MASTER_ADDR/MASTER_PORT from it)."""
        return self.world_size > 1


def read_env(environ: Mapping[str, str] | None = None) -> DistEnv:
    environ = os.environ if environ is None else environ

    def number(name: str, default: int) -> int:
        return int(environ.get(name, default))

    world_size = number("WORLD_SIZE", 1)
    return DistEnv(
        rank=number("RANK", 0),
        world_size=world_size,
        local_rank=number("LOCAL_RANK", 0),
        local_world_size=number("LOCAL_WORLD_SIZE", world_size),
        restart_count=number("TORCHELASTIC_RESTART_COUNT", 0),
        attempt=attempt_id(environ),
        group_world_size=int(environ["GROUP_WORLD_SIZE"]) if "GROUP_WORLD_SIZE" in environ else None,
    )
