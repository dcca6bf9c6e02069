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
of rank 0 writes a fresh id there and every node reads it (`agree_attempt`); the launcher (trainer/launch/rendezvous.py)
does this on each rendezvous and hands the id to the workers in their environment (the agent's own environment,
which torch's SubprocessHandler copies into every worker it starts). Torch-free: the store is anything with set,
get and add.

The id starts with the number of this start of the workers in the run, counted in the store below the round's
prefix (etcd's, or the c10d or static rendezvous' TCP store), which outlives the rounds: the trainer reports
`restarts` from it, the same on every rank, where torchrun's count would show only the leader node's own. A TrainJob's
static rendezvous is new with each restart of the gang, so there the count starts after the gang's restarts so far
(JobSet's restart-attempt label, trainer/launch/gang.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Protocol

from trainer.base.errors import InputError
from trainer.base.pod.exits import LAUNCH_MODULE

ATTEMPT_ENV = "TRAINER_ATTEMPT_ID"
ATTEMPT_KEY = "trainer/attempt-id"


class KeyValueStore(Protocol):
    """The part of torch.distributed.Store this needs: get blocks until the key is set (or the store times out)."""

    # Positional-only, as torch's pybind signatures are (arg0, arg1).
    def set(self, key: str, value: str, /) -> None: ...

    def get(self, key: str, /) -> bytes: ...

    def add(self, key: str, amount: int, /) -> int: ...


def new_attempt_id() -> str:
    return uuid.uuid4().hex[:12]


def agree_attempt(
    store: KeyValueStore,
    node_rank: int,
    run_id: str,
    new_id: Callable[[], str] = new_attempt_id,
    earlier_starts: int = 0,
) -> str:
    """The attempt id of the round `store` belongs to, '<start>-<random>': made by the node of rank 0, read by every
    node. `store` is the round's (torch's PrefixStore); its underlying store counts the starts of run `run_id`, after
    `earlier_starts` that no store of this run saw (a TrainJob's earlier gangs, trainer/launch/gang.py)."""
    if node_rank == 0:
        run_store: KeyValueStore = getattr(store, "underlying_store", store)
        start = earlier_starts + run_store.add(f"trainer/{run_id}/worker-starts", 1)
        store.set(ATTEMPT_KEY, f"{start}-{new_id()}")
    return store.get(ATTEMPT_KEY).decode()


def attempt_start(attempt: str) -> int | None:
    """Which start of the workers in the run `attempt` is (1 for the first), or None for an id without the count."""
    head, _, _ = attempt.partition("-")
    return int(head) if head.isdigit() else None


class MissingAttemptError(InputError):
    """A run on several nodes without the launcher's agreed attempt id: its nodes could not be sure to meet."""


def attempt_id(environ: Mapping[str, str]) -> str:
    """This start of the workers: the launcher's agreed id, or, on one node under a plain torchrun, its restart count.
    On several nodes that count agrees between nodes only where every node's workers failed, so the nodes of a
    restart could look for each other under different store prefixes and wait there for good: refused."""
    agreed = environ.get(ATTEMPT_ENV)
    if agreed:
        return agreed
    nodes = int(environ.get("GROUP_WORLD_SIZE", "1"))
    if nodes > 1:
        raise MissingAttemptError(
            f"{ATTEMPT_ENV} is not set in a run of {nodes} nodes: torchrun's restart counts differ between nodes, so "
            f"the workers need the attempt id the launcher agrees on; start them with python -m {LAUNCH_MODULE}"
        )
    return f"restart-{environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
