"""bad-node: one node's fabric is slow, as a node with a bad link or GPU is.

Its pod's workers run the trainer's fabric preflight with each timed collective delayed (TRAINER_FAULT slow_preflight,
trainer/base/faults.py), from the start, before step 1. The preflight names that node (its pairs with the other nodes
are slow; that takes three nodes or more, one rank each here), its workers exit EXIT_BAD_NODE and its launcher 201; the
local run taints its node and keeps the pod created again off it (local/nodes.py), so that pod stays Pending, and the
other nodes' workers restart, uncounted, into a round without it. The job goes on from the last checkpoint (none yet:
the preflight runs before step 1) on the nodes left when its elastic minimum allows, and ends saying a node is needed
when it does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from local.agents import JobPods
from local.drills.base import Drill, DrillError, DrillReport, Injected, newest_checkpoint_step
from local.etcd import LocalEtcd
from local.options import LocalJobOptions
from trainer.base.faults import FAULT_ENV, slow_preflight_fault

# The delay before each of the slow node's timed preflight collectives. The CPU's gloo collectives of the local
# preflight take milliseconds, so this puts the node far below any --preflight-min-fraction.
BAD_NODE_DELAY_MS = 200
# The preflight names a node whose network is slow by its pairs with two other nodes (trainer/base/hardware/fabric.py
# judge): three nodes at least, with the one rank each that the local run gives a node.
BAD_NODE_NODES = 3


class BadNode(Drill):
    name = "bad-node"
    targets_pod = True

    @staticmethod
    def job_defaults(job: LocalJobOptions, elastic: bool) -> LocalJobOptions:
        """The preflight names a node among three; the job goes on with two."""
        return replace(job, nodes=job.nodes or BAD_NODE_NODES, min_nodes=job.min_nodes or BAD_NODE_NODES - 1)

    def check_job(self, nodes: range, replicas: int, local_etcd: bool, elastic: bool) -> None:
        if replicas < BAD_NODE_NODES:
            raise DrillError(f"{self.name} needs the preflight to name one of {BAD_NODE_NODES} nodes or more (one rank "
                             f"each here), but the job runs {replicas}; run with --nodes {BAD_NODE_NODES}")  # fmt: skip

    def describe(self, pods: Sequence[str]) -> str:
        """No trigger: the fault is in the pod's environment (agent_env)."""
        return f"{self.name}{self.target(pods)} from its start: its fabric preflight is slow"

    def agent_env(self, pod_index: int) -> dict[str, str]:
        """The slow preflight on its pod; nothing for the others."""
        return {FAULT_ENV: slow_preflight_fault(BAD_NODE_DELAY_MS)} if pod_index == self.pod_index else {}

    def poll(self, pods: JobPods, etcd: LocalEtcd | None, checkpoint_dir: Path | None, last_step: int) -> str:
        """Its fault is in the pod's environment from the start: the first poll only reports it."""
        if self.report is not None:
            return ""
        detail = self.inject(pods, etcd).detail
        self.report = DrillReport(self.name, last_step, newest_checkpoint_step(checkpoint_dir), detail)
        return detail

    def inject(self, pods: JobPods, etcd: LocalEtcd | None) -> Injected:
        pod = pods.pods[self.pod_index].name
        return Injected(f"{pod}'s preflight collectives each delayed {BAD_NODE_DELAY_MS} ms ({FAULT_ENV}), from its "
                        "start", [], [])  # fmt: skip
