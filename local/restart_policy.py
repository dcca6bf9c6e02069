"""What happens to a worker pod whose container exited, as the kubelet and the Training Operator decide it.

Pure: the local run (local/agents.py) applies it to its agents, the tests check it case by case. The rules
are kubeflow/trainer v1.9.4's for a PyTorchJob's Worker replicas:
- restartPolicy OnFailure / Always: the kubelet restarts the container in place; the operator fails the job as
  soon as the restarts of all running pods together reach runPolicy.backoffLimit (pkg/core/job.go PastBackoffLimit).
- Never: the pod fails, and with it the job (pkg/controller.v1/pytorch/pytorchjob_controller.go UpdateJobStatus).
- ExitCode: the pod's own policy is Never (pkg/core/pod.go SetRestartPolicy); exit codes from 128 up are
  retryable and the operator creates the pod again, codes 1 to 127 fail the job at once
  (pkg/controller.v1/common/pod.go ReconcilePods, pkg/util/train/train_util.go IsRetryableExitCode). backoffLimit
  counts for it only when it is 0, which fails the job on any failure (pkg/controller.v1/common/job.go).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from trainer.launch_exits import FIRST_RETRYABLE_EXIT, describe_exit, exit_for_signal, is_retryable

ALWAYS, ON_FAILURE, NEVER, EXIT_CODE = "Always", "OnFailure", "Never", "ExitCode"
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


def container_exit_code(returncode: int) -> int:
    """The exit code Kubernetes reports for a container process: 128 + N for one killed by signal N (Python's
    subprocess gives -N for that)."""
    return exit_for_signal(-returncode) if returncode < 0 else returncode


def exit_outcome(policy: str, code: int, restarts: int, backoff_limit: int) -> Outcome:
    """What follows a worker container's exit with `code`, after `restarts` restarts or re-creations of the job's
    pods so far. `code` is the container's exit code as Kubernetes reports it (see container_exit_code)."""
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
