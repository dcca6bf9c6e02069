"""The PyTorchJob's pods and restart rule as the Training Operator v1.9.4 runs them (restart_policy.py).

- An agent that exits is treated as the Worker replica's restartPolicy says, the pod's status read as the operator
  reads it (restart_policy.py container_exit: the `pytorch` container's exit code): under ExitCode, the job's
  policy, a code from 1 to 127 (the launcher's when torchrun's restarts are spent or the
  rendezvous is closed) fails the job at once, and a code from 128 up (stopped or killed by a signal, or the
  launcher's after a lost etcd; trainer/base/pod/exits.py) gets the pod created again; under OnFailure the container
  restarts until the restarts of all pods reach backoffLimit. A restarted or re-created pod runs the same command
  and environment.
- When the job fails, the pods still running are stopped (cleanPodPolicy Running).
- A pod that a drill kills is lost with its node: it is not started again, and the job carries on with the
  agents left, within the elastic range.
- A pod whose launcher found its node bad (EXIT_BAD_NODE) taints its node (the local stand-in for the launcher's
  call to the API server, trainer/launch/node_taint.py); the pod created again has no other node to go to and stays
  Pending (local/nodes.py), and the job carries on with the agents left, or ends where its elastic minimum says a node
  is needed.
- A failure that stops the attempt ends the job: the operator starts no new attempt (PodRestarts).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import replace
from pathlib import Path
from typing import Any

from local.agents import JobPods, Pod, PodEvent, PodPhase
from local.launch import AgentLaunch, LocalPlan
from local.nodes import LocalNodes
from local.procs import kill_tree
from local.pytorchjob.restart_policy import DEFAULT_CONTAINER, Action, container_exit
from local.restart_rule import AfterFailure
from trainer.base.pod.bad_node import NODE_NAME_VARIABLE
from trainer.base.pod.exits import EXIT_BAD_NODE
from trainer.launch.node_taint import bad_node_taint

# The pod as the local run has it: the agent is the default container, the one the operator reads exit codes from
# (restart_policy.py). Init containers do not run here: the local volumes are this user's directories.
AGENT_POD = {"containers": [{"name": DEFAULT_CONTAINER}]}


class WorkerPods(JobPods):
    """The PyTorchJob's worker pods, each restarted or created again on its own as the operator's rule says."""

    def __init__(
        self,
        launches: list[AgentLaunch],
        log_dir: Path,
        backoff_limit: int,
        restart_policy: str,
        nodes: LocalNodes | None = None,
    ) -> None:
        super().__init__(launches, log_dir)
        self.nodes = nodes  # where pods created again may go; None: anywhere
        self.backoff_limit = backoff_limit
        self.restart_policy = restart_policy
        self.restarts = 0  # restarts and re-creations of all pods together

    def _after_exit(self, pod: Pod, code: int) -> PodEvent:
        assert pod.process is not None
        kill_tree(pod.process.pid, list(pod.seen))  # what is left of the container goes with it
        outcome = container_exit(
            self.restart_policy, AGENT_POD, DEFAULT_CONTAINER, code, self.restarts, self.backoff_limit
        )
        assert outcome is not None  # the pod's main container ended: something always follows
        launcher = pod.launcher_line()
        said = f" [{launcher}]" if launcher else ""
        if outcome.action is Action.SUCCEED:
            pod.phase = PodPhase.SUCCEEDED
            return PodEvent(pod.name, f"agent {outcome.why}")
        if outcome.action is Action.FAIL_JOB:
            pod.phase = PodPhase.FAILED
            self.failure = f"{pod.name}'s agent {outcome.why}{said}"
            return PodEvent(pod.name, f"agent {outcome.why}: the PyTorchJob failed{said}")
        self.restarts += 1
        pod.restarts += 1
        if self.nodes is not None:
            if code == EXIT_BAD_NODE:  # what the launcher asks the API server for; the local run has none
                self.nodes.taint(pod.launch.env.get(NODE_NAME_VARIABLE, ""), bad_node_taint())
            if unschedulable := self.nodes.unschedulable(pod.launch.env):
                return self._pending(pod, f"agent {outcome.why}{said}; it stays Pending: {unschedulable}")
        pod.start()
        return PodEvent(pod.name, f"agent {outcome.why} (restart {self.restarts} of the job's pods){said}")

    def _pending(self, pod: Pod, what: str) -> PodEvent:
        """The pod created again with no node to go to; the job fails when the pods left are too few to go on."""
        assert self.nodes is not None
        pod.phase = PodPhase.PENDING
        running = sum(other.phase is PodPhase.RUNNING for other in self.pods)
        if short := self.nodes.short_of(running):
            self.failure = f"{pod.name} is Pending and {short}"
            return PodEvent(pod.name, f"{what}; the job cannot go on: {short}")
        return PodEvent(pod.name, f"{what}; the job goes on with {running} node(s)")


def nodes_for(manifest: Mapping[str, Any]) -> LocalNodes:
    """The nodes of a PyTorchJob's local run: its Worker template's tolerations, its elasticPolicy's minReplicas."""
    spec = manifest["spec"]
    worker = spec["pytorchReplicaSpecs"]["Worker"]
    policy = spec.get("elasticPolicy") or {}
    tolerations = tuple(worker["template"]["spec"].get("tolerations", []))
    return LocalNodes(tolerations, int(policy.get("minReplicas", worker["replicas"])))


def elastic_minimum(agent_env: Mapping[str, str]) -> int:
    """The fewest nodes an agent's torchrun goes on with: PET_NNODES's MIN (the operator's "MIN:MAX")."""
    return int(agent_env["PET_NNODES"].split(":")[0])


class PodRestarts:
    """The Training Operator's rule for a PyTorchJob (restartPolicy ExitCode): each pod is restarted or created again
    on its own within the one attempt (WorkerPods); a failure that stops the attempt ends the job."""

    chart_title = "(local)"

    def __init__(self, nodes: LocalNodes | None = None) -> None:
        """`nodes`: where pods created again may go (their taints outlive an attempt, as nodes do); None: anywhere."""
        self.nodes = nodes

    def pods(self, plan: LocalPlan, log_dir: Path) -> WorkerPods:
        nodes = None if self.nodes is None else replace(self.nodes, min_pods=elastic_minimum(plan.agents[0].env))
        return WorkerPods(plan.agents, log_dir, plan.backoff_limit, plan.restart_policy, nodes)

    def after_failure(self, pods: JobPods, plan: LocalPlan, disrupted: Set[str]) -> AfterFailure:
        return AfterFailure(None, pods.failure or "; ".join(f"{pod.name} {pod.phase.value}" for pod in pods.pods))

    def pod_restarts(self, pods: JobPods, plan: LocalPlan) -> int:
        assert isinstance(pods, WorkerPods)
        return pods.restarts
