"""A TrainJob's pods and restart rule as the Job and JobSet controllers run them.

The pods failed by the time the attempt stops are read as the Job controller reads them (the runtime's pod with its
init containers exited 0 and the node container's exit code; a pod lost with its node has no condition), and
jobset_policy.py applies the runtime's podFailurePolicy and JobSet failurePolicy to them: the JobSet fails, or stops
every pod and starts them all again, a fresh static rendezvous, counted against maxRestarts or not. The trainer
resumes from its last checkpoint.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Set
from pathlib import Path
from typing import Any

from local.agents import JobPods, Pod, PodEvent, PodPhase
from local.etcd import free_port
from local.launch import LocalPlan
from local.options import LocalRunError
from local.pod_status import container_exit_code
from local.procs import kill_tree
from local.restart_rule import AfterFailure
from local.trainjob.jobset_policy import GangOutcome, JobSetRestarts, Verdict, gang_outcome, trainer_job
from local.trainjob.launch import NODE, with_gang_restart
from local.trainjob.pod_failure_policy import DISRUPTION_TARGET, FailedPod, pod_exit

Objects = tuple[dict[str, Any], dict[str, Any]]  # the ClusterTrainingRuntime and the TrainJob


class GangPods(JobPods):
    """The TrainJob's pods of one JobSet attempt: an exit other than 0 fails the pod's Job at once, and with it this
    attempt; what follows is the JobSet's to decide (GangRestarts)."""

    def _after_exit(self, pod: Pod, code: int) -> PodEvent:
        assert pod.process is not None
        kill_tree(pod.process.pid, list(pod.seen))  # what is left of the container goes with it
        launcher = pod.launcher_line()
        said = f" [{launcher}]" if launcher else ""
        if code == 0:
            pod.phase = PodPhase.SUCCEEDED
            return PodEvent(pod.name, "agent exited 0")
        pod.phase = PodPhase.FAILED
        self.failure = f"{pod.name}'s agent exited {code}{said}"
        return PodEvent(pod.name, f"agent exited {code}: its Job failed (restartPolicy Never, backoffLimit 0){said}")


def failed_pods(
    pods: JobPods,
    runtime: dict[str, Any],
    namespace: str,
    disrupted: Collection[str] = (),
) -> list[FailedPod]:
    """The attempt's failed pods as the Job controller finds them: the runtime's pod, its init containers exited 0
    (they do not run here) and its node container with the agent's exit code; a pod lost with its node first (it
    was killed first), then the others that failed. A pod in `disrupted` (evicted by the evict-pod drill, as a
    drain evicts it) carries the condition DisruptionTarget=True, which the kubelet's eviction and the API server's
    eviction sets on it."""
    pod_spec = trainer_job(runtime)["template"]["spec"]
    return [
        pod_exit(
            pod_spec,
            pod.name,
            namespace,
            NODE,
            container_exit_code(pod.process.returncode),
            conditions=((DISRUPTION_TARGET, "True"),) if pod.name in disrupted else (),
        )
        for phase in (PodPhase.LOST, PodPhase.FAILED)
        for pod in pods.pods
        if pod.phase is phase and pod.process is not None and pod.process.returncode is not None
    ]


def jobset_outcome(
    pods: JobPods,
    objects: Objects,
    restarts: JobSetRestarts,
    disrupted: Collection[str] = (),
) -> GangOutcome:
    """What the Job and JobSet controllers do about the attempt's failed pods (`disrupted`: those evicted)."""
    runtime, trainjob = objects
    failed = failed_pods(pods, runtime, trainjob["metadata"]["namespace"], disrupted)
    if not failed:
        raise LocalRunError(
            f"{trainjob['metadata']['name']}: the gang stopped with no pod failed and not all succeeded"
        )
    outcome = gang_outcome(runtime, failed, restarts)
    if outcome.verdict is Verdict.REPLACE_POD:  # no rule of ours ignores a failure; a static group could not take it
        raise LocalRunError(f"{outcome.why}: replacing one pod of a static rendezvous is not modelled here")
    names = ", ".join(f"{pod.name} ({pod.containers[0].exit_code})" for pod in failed)
    return dataclasses.replace(outcome, why=f"{names} failed; {outcome.why}")


class GangRestarts:
    """JobSet's rule for a TrainJob: a failed pod fails its Job and the attempt (GangPods); the runtime's policies then
    fail the JobSet or start every pod again, a fresh static rendezvous on a new master port, counted against
    maxRestarts or not (jobset_outcome)."""

    chart_title = "(local TrainJob)"

    def __init__(self, objects: Objects, echo: Callable[[str], None]) -> None:
        self.objects = objects
        self.echo = echo
        self.restarts = JobSetRestarts()

    def pods(self, plan: LocalPlan, log_dir: Path) -> JobPods:
        pods = GangPods(plan.agents, log_dir)
        for pod in pods.pods:
            pod.restarts = self.restarts.restarts  # the JobSet's restart attempt, in the start line of each pod's log
        return pods

    def after_failure(self, pods: JobPods, plan: LocalPlan, disrupted: Set[str]) -> AfterFailure:
        outcome = jobset_outcome(pods, self.objects, self.restarts, disrupted)
        self.echo(f"[jobset] {outcome.why}")
        if outcome.verdict is not Verdict.RESTART:
            return AfterFailure(None, outcome.why)
        self.restarts = outcome.restarts
        return AfterFailure(with_gang_restart(plan, free_port(), self.restarts.restarts))

    def pod_restarts(self, pods: JobPods, plan: LocalPlan) -> int:
        return self.restarts.restarts * plan.replicas  # each JobSet restart creates every pod again
