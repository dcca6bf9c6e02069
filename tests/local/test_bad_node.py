"""The local run's model of a bad node (local/nodes.py, local/agents.py): the scheduler's taint rule, the pod created
again after EXIT_BAD_NODE kept off its tainted node, the job going on or ending by its elastic minimum; then the
bad-node drill end to end (local/drills/bad_node.py): one node's slow preflight names it, and its launcher exits 201."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from local.agents import PodPhase
from local.launch import AgentLaunch, local_node_name
from local.nodes import LocalNodes, tolerates, untolerated
from local.options import LocalJobOptions
from local.pytorchjob.pods import WorkerPods
from local.pytorchjob.restart_policy import EXIT_CODE
from trainer.base.flags.config import TrainConfig
from trainer.base.pod.bad_node import BAD_NODE_TAINT_KEY, NODE_NAME_VARIABLE
from trainer.base.pod.exits import EXIT_BAD_NODE
from trainer.launch.node_taint import bad_node_taint

from .runs import RUN_TIMEOUT_S, log_of, processes_mentioning, run_dev

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}


def test_a_toleration_matches_as_the_scheduler_matches_it() -> None:
    assert tolerates(GPU_TOLERATION, GPU_TAINT)
    assert not tolerates(GPU_TOLERATION, bad_node_taint())
    assert tolerates({"operator": "Exists"}, bad_node_taint())  # empty key and Exists: every taint
    assert tolerates({"key": BAD_NODE_TAINT_KEY, "operator": "Exists"}, bad_node_taint())
    assert not tolerates({**GPU_TOLERATION, "effect": "NoExecute"}, GPU_TAINT)
    assert untolerated([GPU_TAINT, {**bad_node_taint(), "effect": "PreferNoSchedule"}], [GPU_TOLERATION]) == []


def test_a_tainted_node_takes_none_of_the_jobs_pods_and_the_minimum_decides() -> None:
    nodes = LocalNodes((GPU_TOLERATION,), min_pods=2)
    env = {NODE_NAME_VARIABLE: local_node_name(2)}
    assert nodes.unschedulable(env) == ""
    nodes.taint(local_node_name(2), GPU_TAINT)
    assert nodes.unschedulable(env) == ""  # the GPU taint is the pods' own
    nodes.taint(local_node_name(2), bad_node_taint("inter_pairs"))
    assert f"{BAD_NODE_TAINT_KEY}=inter_pairs:NoSchedule" in nodes.unschedulable(env)
    assert nodes.unschedulable({NODE_NAME_VARIABLE: local_node_name(0)}) == ""
    assert nodes.short_of(2) == "" and "a node is needed" in nodes.short_of(1)


def _pods(tmp_path: Path, min_pods: int) -> WorkerPods:
    """Three pods whose 'agents' are tiny processes: the last exits 201 at once, the others wait."""
    config = TrainConfig()
    launches = [
        AgentLaunch(
            f"job-worker-{index}",
            [sys.executable, "-c", f"import sys, time; time.sleep(60) if {index} < 2 else sys.exit({EXIT_BAD_NODE})"],
            {NODE_NAME_VARIABLE: local_node_name(index)},
            config,
        )
        for index in range(3)
    ]
    return WorkerPods(launches, tmp_path, backoff_limit=3, restart_policy=EXIT_CODE,
                      nodes=LocalNodes((GPU_TOLERATION,), min_pods=min_pods))  # fmt: skip


def _poll_until_pending(pods: WorkerPods) -> list[str]:
    events: list[str] = []
    deadline = time.monotonic() + 20
    while pods.pods[2].phase is PodPhase.RUNNING and time.monotonic() < deadline:
        events += [event.what for event in pods.poll()]
        time.sleep(0.05)
    return events


@pytest.mark.parametrize("min_pods", [2, 3])
def test_the_pod_of_a_bad_node_stays_pending_and_the_job_goes_on_only_above_its_minimum(
    tmp_path: Path, min_pods: int
) -> None:
    pods = _pods(tmp_path, min_pods)
    pods.start()
    try:
        (event,) = _poll_until_pending(pods)
        assert pods.pods[2].phase is PodPhase.PENDING
        assert pods.nodes is not None and pods.nodes.taints[local_node_name(2)] == [bad_node_taint()]
        assert "stays Pending" in event
        if min_pods == 2:
            assert not pods.failure and "goes on with 2 node(s)" in event
            assert [pod.phase for pod in pods.pods[:2]] == [PodPhase.RUNNING, PodPhase.RUNNING]
        else:
            assert "a node is needed" in pods.failure and pods.finished
    finally:
        pods.stop(grace_s=2)


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_the_bad_node_drill_names_the_slow_node_and_ends_when_no_node_is_left(tmp_path: Path) -> None:
    """Three nodes, none to spare (min 3): the slow node's launcher exits 201, its pod stays Pending, and the run
    ends saying a node is needed. (With min 2 the same job goes on with two nodes, after torch's rendezvous has let
    the lost node's keep-alive expire and waited its last call: a minute more on this machine.)"""
    result = run_dev(tmp_path, drill="bad-node", job=LocalJobOptions(nodes=3, min_nodes=3, steps=4))
    assert not result.succeeded
    assert "a node is needed" in result.reason
    assert result.drill is not None and result.drill.at_step == 0
    bad = log_of(result, 2)
    assert f"exit {EXIT_BAD_NODE} (bad node" in bad
    assert local_node_name(2) in bad  # the preflight names it by the downward API's NODE_NAME
    # The launcher tried to taint it (no API server here: the local run's nodes take the taint instead)
    assert f"node taint: node {local_node_name(2)} not tainted: no Kubernetes API server" in bad
    assert not processes_mentioning(str(tmp_path))
