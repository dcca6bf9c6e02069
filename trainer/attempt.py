"""One identity for each start of the workers, the same on every rank of it, whatever each node's own count says.

torchrun counts restarts per node (TORCHELASTIC_RESTART_COUNT = max_restarts - remaining restarts, torch 2.13
torch/distributed/elastic/agent/server/api.py SimpleElasticAgent._rendezvous): a failure of a node's own workers
counts, a restart for a membership change does not (api.py _invoke_run: num_nodes_waiting > 0 restarts the group
without touching _remaining_restarts). On NCCL the peers of a crashed rank do not fail, they block in the collective
(until its timeout), so only the crashed node counts the restart; its workers then start under another count than
their peers and, where the count names the attempt, they never meet. The count is right only where every node's
workers failed at once, as they do on gloo.

What every node of a restart does share is the round of the rendezvous it just joined: its store
(RendezvousInfo.store, a prefix per round in torch's dynamic rendezvous, dynamic_rendezvous.py _get_store). The node
of rank 0 writes a fresh id there and every node reads it (`agree_attempt`); the launcher (trainer/launch_rendezvous.py)
does this on each rendezvous and hands the id to the workers in their environment (the agent's own environment,
which torch's SubprocessHandler copies into every worker it starts). Torch-free: the store is anything with set/get.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Protocol

ATTEMPT_ENV = "TRAINER_ATTEMPT_ID"
ATTEMPT_KEY = "trainer/attempt-id"


class RoundStore(Protocol):
    """The part of torch.distributed.Store this needs: get blocks until the key is set (or the store times out)."""

    def set(self, key: str, value: str) -> None: ...

    def get(self, key: str) -> bytes: ...


def new_attempt_id() -> str:
    return uuid.uuid4().hex[:12]


def agree_attempt(store: RoundStore, node_rank: int, new_id: Callable[[], str] = new_attempt_id) -> str:
    """The attempt id of the round `store` belongs to: made by the node of rank 0, read by every node."""
    if node_rank == 0:
        store.set(ATTEMPT_KEY, new_id())
    return store.get(ATTEMPT_KEY).decode()


def attempt_id(environ: Mapping[str, str]) -> str:
    """This start of the workers: the launcher's agreed id, or, under a plain torchrun, its restart count (which
    agrees between nodes only where every node's workers failed)."""
    agreed = environ.get(ATTEMPT_ENV)
    if agreed:
        return agreed
    return f"restart-{environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
