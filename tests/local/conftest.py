"""End-to-end fixtures: local runs of the dev stack's job, each run once per module and checked by several tests,
and an etcd that several runs share."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from local.etcd import LocalEtcd
from local.supervise import LocalResult
from tests.local.runs import ELASTIC, NODE_SHAPED, run_dev


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> LocalResult:
    """Two agents and no fault: the reference a drill's run is compared with."""
    return run_dev(tmp_path_factory.mktemp("clean"))


@pytest.fixture(scope="module")
def killed_agent_run(tmp_path_factory: pytest.TempPathFactory) -> LocalResult:
    """Worker pod 1 (its agent and its worker) killed after the first checkpoint."""
    return run_dev(tmp_path_factory.mktemp("kill-agent"), drill="kill-agent")


@pytest.fixture(scope="module")
def exhausted_agent_run(tmp_path_factory: pytest.TempPathFactory) -> LocalResult:
    """Worker pod 1's workers killed after the first checkpoint and again each time its agent restarts them."""
    return run_dev(tmp_path_factory.mktemp("kill-workers"), drill="kill-workers")


@pytest.fixture(scope="module")
def hung_peer_run(tmp_path_factory: pytest.TempPathFactory) -> LocalResult:
    """Two workers per pod; after the first checkpoint one of pod 1's killed, the other three left blocked in their
    collective, as NCCL leaves them."""
    return run_dev(tmp_path_factory.mktemp("hung-peer"), drill="hung-peer", job=NODE_SHAPED)


@pytest.fixture(scope="module")
def evicted_run(tmp_path_factory: pytest.TempPathFactory) -> LocalResult:
    """Worker pod 1 evicted (SIGTERM, as a drain) twice, in a job whose maxRestarts is 1."""
    job = dataclasses.replace(ELASTIC, max_restarts=1)
    return run_dev(tmp_path_factory.mktemp("evict-pod"), drill="evict-pod", job=job)


@pytest.fixture(scope="module")
def restarted_etcd_run(tmp_path_factory: pytest.TempPathFactory) -> LocalResult:
    """etcd stopped and started again, empty, after the first checkpoint."""
    return run_dev(tmp_path_factory.mktemp("restart-etcd"), drill="restart-etcd")


@pytest.fixture
def shared_etcd(tmp_path: Path) -> Iterator[LocalEtcd]:
    """An etcd the test owns, handed to runs through --etcd-endpoint, so that they share it."""
    etcd = LocalEtcd.start(log_path=tmp_path / "etcd.log")
    try:
        yield etcd
    finally:
        etcd.stop()
