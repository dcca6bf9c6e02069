"""Trainer test fixtures: the uninterrupted single-process reference run every comparison starts from, a process
group of one for tests that shard in this process, and a real etcd for the rendezvous tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch.distributed as dist

from local.etcd import LocalEtcd
from tests.harness.trainer_runs import TINY, TrainerRun, run_trainer


@pytest.fixture(scope="session")
def reference_run(tmp_path_factory: pytest.TempPathFactory) -> TrainerRun:
    """The tiny preset trained for 6 steps in one plain process, never interrupted."""
    run = run_trainer(TINY, tmp_path_factory.mktemp("reference"))
    assert run.returncode == 0, run.output
    assert [record["step"] for record in run.metrics] == [1, 2, 3, 4, 5, 6]
    return run


@pytest.fixture
def world_of_one() -> Iterator[None]:
    """A gloo process group of this process alone, destroyed afterwards."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def rendezvous_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEtcd]:
    """An etcd with the v2 API on loopback, for a module's rendezvous tests; stopped after them."""
    etcd_server = LocalEtcd.start(log_path=tmp_path_factory.mktemp("etcd") / "etcd.log")
    try:
        yield etcd_server
    finally:
        etcd_server.stop()
