"""The etcd-v2 rendezvous with its store keyed by the rendezvous state's generation, so that no round reads the keys of
an earlier round that had the same number.

torch 2.13's etcd-v2 backend keeps the rendezvous state in one etcd key written with a two-hour TTL
(elastic/rendezvous/etcd_rendezvous_backend.py EtcdRendezvousBackend, _DEFAULT_TTL 7200), and every round's store is
a PrefixStore "torch.rendezvous.<run id>.<round>" over an EtcdStore whose keys have no TTL at all (etcd_store.py
EtcdStore.set, add; dynamic_rendezvous.py _get_store). The agents' keep-alives rewrite the state every few seconds,
so it expires only when no agent of the job has been alive for two hours: every pod Pending that long for capacity,
say. The state then starts again at round 0, and each round's store still holds the keys written in the earlier
round of that number: the address node 0 published for its TCP store, the agents' rank assignment, the workers'
attempt id (trainer/base/pod/attempt.py). A node reads a stale value before node 0 writes the new one, and the nodes of
the round look for each other in different places.

The state key's etcd createdIndex is new whenever the key is created again, and the same for every node that reads
or writes it while it lives. The backend here records it from each read and write of the state, and the store puts it
in front of every key: the rounds of a new generation start in an empty namespace.
"""

from __future__ import annotations

from typing import Any

import etcd
from torch.distributed.elastic.rendezvous import RendezvousHandler, RendezvousParameters
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler
from torch.distributed.elastic.rendezvous.etcd_rendezvous_backend import EtcdRendezvousBackend, create_backend
from torch.distributed.elastic.rendezvous.etcd_store import EtcdStore

# Where torch's create_backend puts the state (key_prefix + "/" + run id) and the store's keys.
STATE_PREFIX = "/torch/elastic/rendezvous"
STORE_PREFIX = "/torch/elastic/store"


class GenerationTrackingBackend(EtcdRendezvousBackend):
    """torch's etcd-v2 backend, remembering the createdIndex of the state key it last read or wrote."""

    generation: int | None = None

    def _decode_state(self, result: Any) -> Any:  # python-etcd's EtcdResult (torch types it with a stub of its own)
        self.generation = result.createdIndex
        return super()._decode_state(result)


class GenerationStore(EtcdStore):
    """torch's EtcdStore, its keys under "gen-<createdIndex>/" of the state its backend last saw (none before the
    node first reached the state, when nothing reads the store)."""

    def __init__(self, client: etcd.Client, prefix: str, backend: GenerationTrackingBackend) -> None:
        self._backend = backend
        self._base = prefix
        super().__init__(client, prefix)  # assigns self.prefix: the setter below keeps it as the base

    @property
    def prefix(self) -> str:
        generation = self._backend.generation
        return self._base if generation is None else f"{self._base}gen-{generation}/"

    @prefix.setter
    def prefix(self, value: str) -> None:
        self._base = value if value.endswith("/") else value + "/"


def create_generational_handler(params: RendezvousParameters) -> RendezvousHandler:
    """What torch's registry builds for etcd-v2 (rendezvous/registry.py _create_etcd_v2_handler), with the backend and
    store above on the same etcd client."""
    _, store = create_backend(params)
    assert isinstance(store, EtcdStore)  # what create_backend makes, typed as any Store
    backend = GenerationTrackingBackend(store.client, params.run_id, key_prefix=STATE_PREFIX)
    return create_handler(GenerationStore(store.client, STORE_PREFIX, backend), backend, params)
