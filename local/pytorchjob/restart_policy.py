"""What happens to a worker pod whose container exited, as the kubelet and the Training Operator decide it.

Pure: the local run (local/pytorchjob/pods.py) applies it to its agents, the tests check it case by case. The rules
are kubeflow/trainer v1.9.4's for a PyTorchJob's Worker replicas:
- restartPolicy OnFailure / Always: the kubelet restarts the container in place; the operator fails the job as
  soon as the restarts of all running pods together reach runPolicy.backoffLimit (pkg/core/job.go PastBackoffLimit).
- Never: the pod fails, and with it the job (pkg/controller.v1/pytorch/pytorchjob_controller.go UpdateJobStatus).
- ExitCode: the pod's own policy is Never (pkg/core/pod.go SetRestartPolicy); exit codes from 128 up are
  retryable and the operator creates the pod again, codes 1 to 127 fail the job at once
  (pkg/controller.v1/common/pod.go ReconcilePods, pkg/util/train/train_util.go IsRetryableExitCode). backoffLimit
  counts for it only when it is 0, which fails the job on any failure (pkg/controller.v1/common/job.go).
- The exit code it judges: ReconcilePods reads it from the default container (`pytorch`) in containerStatuses only,
  and only for a pod whose phase is Failed. A pod that failed in an init container has no such code: the operator
  takes 0xbeef, retryable, and creates the pod again, for a permanent failure too, forever, holding every node.

pod_outcome models that reading of a pod's status; recreation_loops runs every container of a rendered PyTorchJob
through it, failing in turn, and names each permanent failure the operator would answer with a new pod.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from local.pod_status import ALWAYS, NEVER, ON_FAILURE, ContainerStatus, exited_container_statuses
from trainer.base.pod.exits import FIRST_RETRYABLE_EXIT, describe_exit, is_retryable

# The operator's own policy beside a pod's three (local/pod_status.py).
EXIT_CODE = "ExitCode"
POLICIES = (ALWAYS, ON_FAILURE, NEVER, EXIT_CODE)
# The operator's default for a PyTorchJob replica without a restartPolicy (pkg/apis/kubeflow.org/v1/pytorch_types.go).
DEFAULT_POLICY = ON_FAILURE


class Action(enum.Enum):
    SUCCEED = "succeed"
    RESTART = "restart"  # the container again in the same pod (OnFailure, Always)
    RECREATE = "recreate"  # a new pod of the same name (ExitCode, retryable code)
    FAIL_JOB = "fail the job"


@dataclass(frozen=True)
class Outcome:
    action: Action
    why: str


def exit_outcome(policy: str, code: int, restarts: int, backoff_limit: int) -> Outcome:
    """What follows a worker container's exit with `code`, after `restarts` restarts or re-creations of the job's
    pods so far. `code` is the container's exit code as Kubernetes reports it (local/pod_status.py
    container_exit_code)."""
    if policy not in POLICIES:
        raise ValueError(f"restartPolicy {policy!r}: expected one of {', '.join(POLICIES)}")
    shown = describe_exit(code)
    if code == 0 and policy != ALWAYS:
        return Outcome(Action.SUCCEED, "exited 0")
    if policy in (ALWAYS, ON_FAILURE):
        # The kubelet restarts the container; the operator fails the job once the restart counts of the running
        # pods add up to backoffLimit (PastBackoffLimit: sum >= limit, or sum > 0 for a limit of 0).
        if restarts + 1 >= max(1, backoff_limit):
            return Outcome(Action.FAIL_JOB, f"exited {shown}; the pods' restarts reached backoffLimit {backoff_limit}")
        return Outcome(Action.RESTART, f"exited {shown}; restartPolicy {policy} restarts the container")
    if policy == NEVER:
        return Outcome(Action.FAIL_JOB, f"exited {shown}; restartPolicy Never fails the job")
    if not is_retryable(code):
        return Outcome(
            Action.FAIL_JOB,
            f"exited {shown}; restartPolicy ExitCode fails the job on codes 1 to {FIRST_RETRYABLE_EXIT - 1} "
            "and restarts nothing",
        )
    if backoff_limit == 0:
        return Outcome(Action.FAIL_JOB, f"exited {shown}; backoffLimit 0 allows no pod to be created again")
    return Outcome(Action.RECREATE, f"exited {shown}, a retryable code under restartPolicy ExitCode; pod created again")


# --- the pod's status, as ReconcilePods reads it (kubeflow/trainer v1.9.4, pkg/controller.v1/common/pod.go)

# The PyTorchJob's default container (pkg/apis/kubeflow.org/v1/pytorch_types.go PyTorchJobDefaultContainerName; the
# reconciler's GetDefaultContainerName, pkg/controller.v1/pytorch/pytorchjob_controller.go): the only container whose
# exit code the operator reads.
DEFAULT_CONTAINER = "pytorch"
# ReconcilePods starts from this "magic number" and keeps it unless the default container has terminated: a pod that
# failed in an init container (the main container never ran) is judged by it. It is >= 128, so retryable under
# ExitCode: the pod is deleted and created again, and the init container fails again, without end.
UNKNOWN_EXIT = 0xBEEF
POD_PENDING, POD_RUNNING, POD_SUCCEEDED, POD_FAILED = "Pending", "Running", "Succeeded", "Failed"
# What any program's failure is taken to exit with, where nothing says which codes it ends with.
ANY_FAILURE = 1


@dataclass(frozen=True)
class PodStatus:
    phase: str
    init_containers: tuple[ContainerStatus, ...] = ()
    containers: tuple[ContainerStatus, ...] = ()


def operator_exit_code(status: PodStatus) -> int:
    """The exit code ReconcilePods acts on: the default container's, read from containerStatuses only, once it has
    terminated; UNKNOWN_EXIT otherwise. initContainerStatuses are never read."""
    code = UNKNOWN_EXIT
    for container in status.containers:
        if container.name == DEFAULT_CONTAINER and container.exit_code is not None:
            code = container.exit_code
    return code


def pod_outcome(policy: str, status: PodStatus, restarts: int, backoff_limit: int) -> Outcome | None:
    """What the operator does with a replica's pod in `status` under the replica's restartPolicy `policy`; None where
    it does nothing (a pod pending or running). ReconcilePods acts on a Failed pod only: under ExitCode a retryable
    code (IsRetryableExitCode, >= 128) deletes it to be created again and any other code fails the job; under
    OnFailure and Always it deletes it too; under Never the job's status fails the job."""
    if policy not in POLICIES:
        raise ValueError(f"restartPolicy {policy!r}: expected one of {', '.join(POLICIES)}")
    if status.phase == POD_SUCCEEDED:
        return Outcome(Action.SUCCEED, "exited 0")
    if status.phase != POD_FAILED:
        return None
    code = operator_exit_code(status)
    if policy in (ALWAYS, ON_FAILURE):
        return Outcome(Action.RECREATE, f"the pod failed; restartPolicy {policy}: the operator creates it again")
    outcome = exit_outcome(policy, code, restarts, backoff_limit)
    if code != UNKNOWN_EXIT:
        return outcome
    failed = [c for c in status.init_containers if c.exit_code not in (None, 0)]
    where = f"init container {failed[0].name} exited {failed[0].exit_code}" if failed else "the pod failed"
    read = f"{where} and {DEFAULT_CONTAINER} never terminated, so the operator takes {UNKNOWN_EXIT:#x}"
    return Outcome(outcome.action, f"{read}: {outcome.why}")


def pod_restart_policy(policy: str) -> str:
    """The pod's own restartPolicy for the replica's (pkg/core/pod.go SetRestartPolicy: ExitCode becomes Never)."""
    return NEVER if policy == EXIT_CODE else policy


def exited_pod_status(pod_spec: dict[str, Any], container: str, code: int) -> PodStatus:
    """The status the kubelet reports when `container` of a pod with restartPolicy Never exits with `code` (every
    earlier init container having exited 0): a failed init container fails the pod and leaves the later init
    containers and every main container waiting; the main container's exit ends the pod, Succeeded on 0."""
    inits, mains = exited_container_statuses(pod_spec, container, code)
    if container in {status.name for status in inits}:
        return PodStatus(POD_PENDING if code == 0 else POD_FAILED, inits, mains)
    phase = POD_SUCCEEDED if code == 0 and len(mains) == 1 else POD_FAILED if code else POD_RUNNING
    return PodStatus(phase, inits, mains)


def container_exit(policy: str, pod_spec: dict[str, Any], container: str, code: int, restarts: int,
                   backoff_limit: int) -> Outcome | None:  # fmt: skip
    """What follows when `container` of a replica's pod exits with `code`: the kubelet's part (a pod whose own
    policy restarts containers restarts it in place) and then the operator's (pod_outcome); None where nothing
    follows yet (an init container done, the pod goes on)."""
    if pod_restart_policy(policy) == NEVER:
        return pod_outcome(policy, exited_pod_status(pod_spec, container, code), restarts, backoff_limit)
    if container in {c["name"] for c in pod_spec.get("initContainers", [])}:
        if code == 0:
            return None
        # Restarted in place, the pod stays Pending; PastBackoffLimit (pkg/core/job.go) counts the restarts of
        # Running pods only, so backoffLimit never ends it.
        why = f"init container {container} exited {code}; restarted in place, never counted to backoffLimit"
        return Outcome(Action.RESTART, why)
    return exit_outcome(policy, code, restarts, backoff_limit)


@dataclass(frozen=True)
class Loop:
    """A permanent failure that the operator answers with a pod (or container) started again, without end."""

    replica: str
    container: str
    code: int
    outcome: Outcome

    def describe(self) -> str:
        return f"{self.replica} container {self.container} failing for good (exit {self.code}): {self.outcome.why}"


def recreation_loops(manifest: dict[str, Any], permanent_exits: Mapping[str, Sequence[int]]) -> list[Loop]:
    """Every container of every replica of the PyTorchJob `manifest`, failing in turn with each code it ends with on
    a failure no retry can cure (`permanent_exits` by container name; ANY_FAILURE for a container not named there),
    whose failure would never end the job. Judged past backoffLimit: a bounded retry ends the job there."""
    spec = manifest["spec"]
    backoff_limit = int((spec.get("runPolicy") or {}).get("backoffLimit", 0))
    loops = []
    for replica, replica_spec in spec["pytorchReplicaSpecs"].items():
        policy = replica_spec.get("restartPolicy", DEFAULT_POLICY)
        pod_spec = replica_spec["template"]["spec"]
        for container in [*pod_spec.get("initContainers", []), *pod_spec["containers"]]:
            name = container["name"]
            for code in permanent_exits.get(name, (ANY_FAILURE,)):
                outcome = container_exit(policy, pod_spec, name, code, backoff_limit, backoff_limit)
                if outcome is not None and outcome.action is not Action.FAIL_JOB:
                    loops.append(Loop(replica, name, code, outcome))
    return loops
