"""What follows a TrainJob pod's exit, as its runtime's Job and JobSet failure policies decide it.

Pure: the local run of a TrainJob (local/trainjob_run.py) applies it to its gang of agents, the tests check it case
by case. Read from the runtime object itself, so that the local run follows the policy the cluster gets
(workloads/job/trainjob.py). The rules, kubernetes-sigs/jobset v0.12.0 and Kubernetes batch/v1:
- A pod that fails fails its Job at once with backoffLimit 0 (reason BackoffLimitExceeded), or with reason
  PodFailurePolicy where a podFailurePolicy rule FailJob matches its exit code.
- The JobSet then applies the first of its failurePolicy.rules that matches a failed Job's reason
  (pkg/controllers/failure_policy.go findFirstFailedPolicyRuleAndJob); none matching, the default RestartJobSet:
  every Job, so every pod, is recreated, while the restarts stay below maxRestarts; after that the JobSet fails.
  Without any failurePolicy the first failed Job fails the JobSet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from local.restart_policy import Action, Outcome
from trainer.launch_exits import describe_exit

POD_FAILURE_POLICY = "PodFailurePolicy"
FAIL_JOBSET = "FailJobSet"


@dataclass(frozen=True)
class GangPolicy:
    max_restarts: int
    fail_codes: frozenset[int]  # exit codes whose Job failure the JobSet does not restart


def _node_job(runtime: Mapping[str, Any]) -> Mapping[str, Any]:
    (job,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    return job["template"]["spec"]


def gang_policy(runtime: Mapping[str, Any]) -> GangPolicy:
    """The runtime's restart rules: maxRestarts, and the exit codes its podFailurePolicy turns into a failure that a
    FailJobSet rule on reason PodFailurePolicy makes final."""
    failure_policy = runtime["spec"]["template"]["spec"].get("failurePolicy")
    if failure_policy is None:
        return GangPolicy(0, frozenset())
    final_reasons = {
        reason
        for rule in failure_policy.get("rules", [])
        if rule["action"] == FAIL_JOBSET
        for reason in rule.get("onJobFailureReasons", [])
    }
    codes: set[int] = set()
    if POD_FAILURE_POLICY in final_reasons:
        for rule in _node_job(runtime).get("podFailurePolicy", {}).get("rules", []):
            exits = rule.get("onExitCodes") or {}
            if rule["action"] == "FailJob" and exits.get("operator") == "In":
                codes.update(exits["values"])
    return GangPolicy(int(failure_policy.get("maxRestarts", 0)), frozenset(codes))


def gang_outcome(policy: GangPolicy, code: int, restarts: int) -> Outcome:
    """What follows a pod's exit with `code` (as Kubernetes reports it) after `restarts` restarts of the JobSet."""
    shown = describe_exit(code)
    if code == 0:
        return Outcome(Action.SUCCEED, "exited 0")
    if code in policy.fail_codes:
        return Outcome(
            Action.FAIL_JOB, f"exited {shown}; podFailurePolicy FailJob, and the JobSet's rule fails the JobSet"
        )
    if restarts >= policy.max_restarts:
        return Outcome(Action.FAIL_JOB, f"exited {shown}; the JobSet's maxRestarts ({policy.max_restarts}) are spent")
    return Outcome(
        Action.RECREATE,
        f"exited {shown}; its Job failed (backoffLimit 0) and the JobSet recreates every pod "
        f"(restart {restarts + 1} of {policy.max_restarts})",
    )
