"""The etcd-v2 rendezvous' store keyed by the state's generation (trainer/launch/etcd_generation.py): when the state
expires (its two-hour TTL, every agent gone that long) and starts again at round 0, the new round reads none of the
keys the earlier round 0 wrote, which torch's own store would hand it. Real etcd (v2 API), one node per round."""

from __future__ import annotations

import etcd
import pytest
from torch.distributed.elastic.rendezvous import RendezvousParameters
from torch.distributed.elastic.rendezvous.etcd_rendezvous_backend import create_backend
from torch.distributed.elastic.rendezvous.registry import get_rendezvous_handler

from local.etcd import LocalEtcd
from trainer.launch.etcd_generation import STATE_PREFIX, GenerationStore, create_generational_handler
from trainer.launch.rendezvous import ETCD_V2, SHARED_STORE_SWITCH, held_rendezvous_shutdowns

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]  # a real etcd: a process of its own
KEY = "trainer/written-in-round-0"


@pytest.fixture(autouse=True)
def unshared_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SHARED_STORE_SWITCH, "1")  # as the launcher runs it: a fresh TCP store address each round


def parameters(rendezvous_etcd: LocalEtcd, run_id: str) -> RendezvousParameters:
    return RendezvousParameters(
        backend=ETCD_V2,
        endpoint=rendezvous_etcd.endpoint,
        run_id=run_id,
        min_nodes=1,
        max_nodes=1,
        local_addr="127.0.0.1",
    )


def expire_state(rendezvous_etcd: LocalEtcd, run_id: str) -> None:
    """What the TTL does after two hours without an agent: the state key is gone."""
    host, port = rendezvous_etcd.endpoint.split(":")
    etcd.Client(host=host, port=int(port)).delete(f"{STATE_PREFIX}/{run_id}")


def round_0_after_expiry(rendezvous_etcd: LocalEtcd, run_id: str, create: object) -> bool:
    """Write KEY in round 0, let the state expire, join again (round 0 anew): whether KEY is still visible there."""
    first = create(parameters(rendezvous_etcd, run_id))  # type: ignore[operator]
    info = first.next_rendezvous()
    assert first._state_holder.state.round == 0
    info.store.set(KEY, "stale")
    expire_state(rendezvous_etcd, run_id)
    again = create(parameters(rendezvous_etcd, run_id))  # type: ignore[operator]
    info = again.next_rendezvous()
    assert again._state_holder.state.round == 0
    return info.store.check([KEY])


def test_torchs_own_store_hands_the_new_round_0_the_keys_of_the_old(rendezvous_etcd: LocalEtcd) -> None:
    assert round_0_after_expiry(rendezvous_etcd, "plain", get_rendezvous_handler)  # what the launcher's handler fixes


def test_the_generational_store_starts_a_new_generation_empty(rendezvous_etcd: LocalEtcd) -> None:
    assert not round_0_after_expiry(rendezvous_etcd, "generational", create_generational_handler)


def test_the_launcher_creates_the_generational_handler_for_etcd_v2(rendezvous_etcd: LocalEtcd) -> None:
    with held_rendezvous_shutdowns() as held:
        handler = get_rendezvous_handler(parameters(rendezvous_etcd, "held"))
    assert handler is held[0]
    assert isinstance(held[0].handler._store, GenerationStore)  # type: ignore[attr-defined]


def test_the_state_lives_where_torchs_backend_keeps_it(rendezvous_etcd: LocalEtcd) -> None:
    """The key the test expires is the one torch's create_backend writes the state to."""
    backend, _ = create_backend(parameters(rendezvous_etcd, "where"))
    assert backend._key == f"{STATE_PREFIX}/where"
