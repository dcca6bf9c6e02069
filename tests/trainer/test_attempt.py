"""The workers' attempt id: one per rendezvous round, the same on every node of it, whatever each node's torchrun
counts (trainer/base/pod/attempt.py); the launcher's rendezvous wrapper hands it to the workers
(trainer/launch/rendezvous.py)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest
import torch.distributed as dist
from torch.distributed.elastic.rendezvous import (
    RendezvousHandler,
    RendezvousInfo,
    RendezvousParameters,
    RendezvousStoreInfo,
)
from torch.distributed.elastic.rendezvous.registry import get_rendezvous_handler

from local.etcd import free_port
from trainer.base.pod.attempt import (
    ATTEMPT_ENV,
    ATTEMPT_KEY,
    MissingAttemptError,
    agree_attempt,
    attempt_id,
    attempt_start,
)
from trainer.base.pod.env import read_env
from trainer.launch.rendezvous import HeldShutdown

TIMEOUT = timedelta(seconds=20)


@pytest.fixture
def server() -> Iterator[dist.TCPStore]:
    """A TCP store kept across rounds, as torch 2.13's rank-0 agent keeps its shared one."""
    store = dist.TCPStore("127.0.0.1", free_port(), is_master=True, timeout=TIMEOUT, wait_for_workers=False)
    yield store


def client(server: dist.TCPStore) -> dist.TCPStore:
    return dist.TCPStore("127.0.0.1", server.port, is_master=False, timeout=TIMEOUT)


def round_store(store: dist.Store, round_: int) -> dist.Store:
    """What torch's dynamic rendezvous hands each node: the shared store under the round's prefix."""
    return dist.PrefixStore(f"torch.rendezvous.job.{round_}", store)


def agree_on_nodes(stores: list[dist.Store]) -> list[str]:
    """Every node agrees at once, each in a thread of its own, as the agents do; node 0 last, so the others wait."""
    found: dict[int, str] = {}
    threads = [threading.Thread(target=lambda r=rank: found.update({r: agree_attempt(stores[r], r, "job")}))
               for rank in reversed(range(len(stores)))]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return [found[rank] for rank in range(len(stores))]


def test_every_node_of_a_round_gets_the_id_node_0_made(server: dist.TCPStore) -> None:
    nodes = [round_store(server, 1), round_store(client(server), 1), round_store(client(server), 1)]
    ids = agree_on_nodes(nodes)
    assert len(set(ids)) == 1 and ids[0]


def test_each_round_gets_a_new_id_although_the_store_outlives_it(server: dist.TCPStore) -> None:
    first = agree_on_nodes([round_store(server, 1), round_store(client(server), 1)])
    second = agree_on_nodes([round_store(server, 2), round_store(client(server), 2)])
    assert first[0] != second[0]


def test_the_id_counts_the_starts_of_the_run_in_the_store_below_the_rounds(server: dist.TCPStore) -> None:
    starts = [attempt_start(agree_on_nodes([round_store(server, r), round_store(client(server), r)])[1])
              for r in (1, 2, 3)]  # fmt: skip
    assert starts == [1, 2, 3]
    env = read_env({"WORLD_SIZE": "2", ATTEMPT_ENV: "3-5e1f09", "TORCHELASTIC_RESTART_COUNT": "0"})
    assert env.group_restarts == 2  # the leader's node counted none of them itself


def test_the_launchers_id_wins_over_torchruns_own_count() -> None:
    env = read_env({"WORLD_SIZE": "2", "RANK": "1", ATTEMPT_ENV: "3f2a", "TORCHELASTIC_RESTART_COUNT": "1"})
    assert (env.attempt, env.restart_count, env.group_restarts) == ("3f2a", 1, 1)


def test_a_plain_torchrun_falls_back_to_its_restart_count() -> None:
    assert attempt_id({"TORCHELASTIC_RESTART_COUNT": "2"}) == "restart-2"
    assert read_env({}).attempt == "restart-0"
    assert read_env({"TORCHELASTIC_RESTART_COUNT": "2"}).group_restarts == 2


class OneRound(RendezvousHandler):
    """torch's handler as far as the wrapper sees it: one round, on `store`, as node `rank`."""

    def __init__(self, store: dist.Store, rank: int) -> None:
        self.store, self.rank = store, rank

    def next_rendezvous(self) -> RendezvousInfo:
        return RendezvousInfo(self.store, self.rank, 2, RendezvousStoreInfo("127.0.0.1", 0))

    def get_backend(self) -> str:
        return "test"

    def is_closed(self) -> bool:
        return False

    def set_closed(self) -> None:
        pass

    def num_nodes_waiting(self) -> int:
        return 0

    def get_run_id(self) -> str:
        return "job"

    def shutdown(self) -> bool:
        return True


def test_the_wrapper_sets_the_rounds_id_for_the_workers_it_starts_next(
    server: dist.TCPStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ATTEMPT_ENV, "before")  # put back as it was after the test
    store = round_store(server, 4)
    info = HeldShutdown(OneRound(store, rank=0)).next_rendezvous()
    assert info.rank == 0
    assert os.environ[ATTEMPT_ENV] == store.get(ATTEMPT_KEY).decode()


def test_the_static_rendezvous_of_a_trainjob_agrees_on_one_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    """The TrainJob's torchrun rendezvouses statically on the master address (one round: --max-restarts=0)."""
    port = free_port()
    handlers = [
        HeldShutdown(get_rendezvous_handler(RendezvousParameters(
            backend="static", endpoint=f"127.0.0.1:{port}", run_id="job", min_nodes=2, max_nodes=2, rank=rank,
            timeout=20,
        )))
        for rank in (0, 1)
    ]  # fmt: skip
    found: dict[int, str] = {}
    monkeypatch.setenv(ATTEMPT_ENV, "before")  # put back as it was after the test

    def join(rank: int) -> None:
        info = handlers[rank].next_rendezvous()  # the wrapper agrees; node 1's waits for node 0's id
        found[rank] = info.store.get(ATTEMPT_KEY).decode()

    threads = [threading.Thread(target=join, args=(rank,)) for rank in (1, 0)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=40)
    assert found[0] == found[1] == os.environ[ATTEMPT_ENV]


def test_a_run_of_several_nodes_without_the_launchers_id_is_refused() -> None:
    with pytest.raises(MissingAttemptError, match="TRAINER_ATTEMPT_ID is not set in a run of 2 nodes"):
        read_env(
            {"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "GROUP_WORLD_SIZE": "2", "TORCHELASTIC_RESTART_COUNT": "1"}
        )


def test_a_trainjobs_gang_counts_its_starts_after_the_jobsets_earlier_restarts(server: dist.TCPStore) -> None:
    """Each gang restart of a TrainJob meets in a fresh static rendezvous (a fresh store, counting from 1): the id
    starts after the restarts JobSet's label gives, so the `restarts` metric is the JobSet's, not always 0."""
    attempt = agree_attempt(round_store(server, 1), 0, "run", earlier_starts=3)
    assert attempt_start(attempt) == 4
    assert read_env({ATTEMPT_ENV: attempt}).group_restarts == 3
