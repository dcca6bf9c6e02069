"""The fabric preflight in real processes (gloo on the CPU): it times every level the job's shape has, names the node
a slowed rank sits on, and the launcher ends that node's pod with EXIT_BAD_NODE while the other node's workers are
restarted without spending a restart; a run that passes carries the figures in its metrics."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from local.etcd import free_port
from tests.harness.listening import listening
from tests.harness.trainer_runs import ROOT, TINY, run_trainer, trainer_env, with_flags
from trainer.base.faults import slow_preflight_fault
from trainer.base.hardware.fabric import NODE_NAME_ENV
from trainer.base.metrics.figures import PREFLIGHT_FAILED_FIELD, PREFLIGHT_FIELDS
from trainer.base.pod.exits import EXIT_BAD_NODE, EXIT_PEER_BAD_NODE, REASON_PREFIX, exit_for_signal

QUICK = ["--preflight-iterations", "2"]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_passing_preflight_records_the_nodes_figures_in_every_record(tmp_path: Path) -> None:
    """One node of two ranks through the launcher: the within-node levels measured, the across-node ones absent."""
    run = run_trainer([*with_flags(TINY, steps="2"), *QUICK], tmp_path, nproc=2, launcher="trainer.launch", timeout=100)
    assert run.returncode == 0, run.output
    assert "fabric preflight intra_all_gather bus bandwidth GB/s: node 0" in run.output
    assert [record["step"] for record in run.metrics] == [1, 2]
    for record in run.metrics:
        assert set(PREFLIGHT_FIELDS) <= set(record)
        assert record["preflight_intra_all_gather_gb_per_s"] > 0
        assert record["preflight_intra_reduce_scatter_gb_per_s"] > 0
        assert record["preflight_inter_all_reduce_gb_per_s"] is None  # one node: no rail
        assert record["preflight_slowest_fraction"] == 1.0  # one node is its own median


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_pairs_name_the_slow_node_among_three_even_the_reference_node(tmp_path: Path) -> None:
    """Three one-rank nodes: a slowed node 2, then a slowed node 0, is the one named."""
    run = run_trainer(
        ["--out", str(tmp_path), "--slow-rank", "2", "--slow-rank", "0"],
        tmp_path,
        nproc=3,
        module="tests.trainer.preflight_probe",
        timeout=50,
    )
    assert run.returncode == 0, run.output
    for index, slow in enumerate((2, 0)):
        codes = {rank: json.loads((tmp_path / f"{index}.{rank}.json").read_text())["code"] for rank in range(3)}
        assert codes == {rank: EXIT_BAD_NODE if rank == slow else EXIT_PEER_BAD_NODE for rank in range(3)}
        figures = json.loads((tmp_path / f"{index}.0.json").read_text())["figures"]
        assert figures["preflight_slowest_fraction"] < 0.7
        assert figures["preflight_inter_all_reduce_gb_per_s"] > 0  # the rails' all-reduce, measured and recorded
        assert "preflight_intra_all_gather_gb_per_s" not in figures  # one rank a node: nothing within a node
    assert "inter_pairs: node 2 (" in run.output and "inter_pairs: node 0 (" in run.output
    # Each failed start is one record of rank 0's metrics file: step 0, its figures, the node it named.
    assert [(r["step"], r[PREFLIGHT_FAILED_FIELD]) for r in run.metrics] == [(0, True), (0, True)]
    for record, slow in zip(run.metrics, (2, 0), strict=True):
        assert record["preflight_slowest_fraction"] < 0.7 and record["preflight_inter_all_reduce_gb_per_s"] > 0
        (named,) = record["preflight_bad_nodes"]
        assert named.endswith(f" (node {slow})")


def launch_node(name: str, port: int, log: Path, fault: str | None) -> subprocess.Popen[str]:
    """One node's pod: `python -m trainer.launch` with two workers, naming its node as the downward API would."""
    command = [
        sys.executable, "-m", "trainer.launch", "--nnodes=2:2", "--nproc-per-node=2", "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=preflight", "--local-addr=127.0.0.1", "--max-restarts=0",
        "-m", "trainer", *TINY, *QUICK,
    ]  # fmt: skip
    env = {**trainer_env(fault), NODE_NAME_ENV: name}
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, text=True)


def wait_until_listening(port: int, process: subprocess.Popen[str], timeout_s: float = 60.0) -> None:
    """Until a server accepts on 127.0.0.1:`port`: the first agent hosts the rendezvous store (the c10d backend on a
    local endpoint: whichever agent binds it first), so the test decides which node it is."""
    deadline = time.monotonic() + timeout_s
    while not listening(port):
        assert process.poll() is None, "the hosting node's launcher ended before it listened"
        assert time.monotonic() < deadline, f"nothing listens on 127.0.0.1:{port} after {timeout_s:.0f} s"
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_slow_nodes_pod_exits_bad_node_and_the_other_restarts_without_counting(tmp_path: Path) -> None:
    """Two nodes of two ranks, node-b's collectives slowed: node-b's launcher ends with 201, naming node-b; node-a's
    workers are restarted although --max-restarts is 0, and its agent waits for a second node (until stopped)."""
    port = free_port()
    logs = {name: tmp_path / f"{name}.log" for name in ("node-a", "node-b")}
    healthy = launch_node("node-a", port, logs["node-a"], None)
    try:
        wait_until_listening(port, healthy)  # node-a hosts the store, which must outlive node-b's exit
    except BaseException:
        healthy.kill()
        raise
    slow = launch_node("node-b", port, logs["node-b"], slow_preflight_fault(200))
    try:
        assert slow.wait(timeout=90) == EXIT_BAD_NODE, logs["node-b"].read_text()
        said = logs["node-b"].read_text().strip().splitlines()[-1]
        assert said.startswith(f"{REASON_PREFIX}exit {EXIT_BAD_NODE} (bad node: fabric preflight), retryable")
        assert "node-b" in said and "rendezvous is left open" in said
        while "restarted without counting" not in logs["node-a"].read_text():
            assert healthy.poll() is None, logs["node-a"].read_text()  # --max-restarts 0 spent would end it with 1
            time.sleep(0.2)
        assert "intra_all_gather: node 1 (node-b)" in logs["node-a"].read_text()  # rank 0 is on node-a
        healthy.send_signal(signal.SIGTERM)
        assert healthy.wait(timeout=60) == exit_for_signal(signal.SIGTERM), logs["node-a"].read_text()
    finally:
        for process in (healthy, slow):
            process.kill()
