"""What follows a failed pod of a TrainJob: its Job's podFailurePolicy, then the JobSet's failurePolicy, both read from
the runtime object itself. The first is local/trainjob/pod_failure_policy.py's. Reading the object makes the local run
(local/trainjob/pods.py) and the tests follow the policy the cluster gets (workloads/job/trainjob.py).

The JobSet's part, kubernetes-sigs/jobset v0.12.0 pkg/controllers/failure_policy.go:
- No failurePolicy: the first failed Job fails the JobSet (reason FailedJobs).
- Otherwise the rules in order (findFirstFailedPolicyRuleAndJob): the first rule that some failed Job matches
  wins, and among the Jobs it matches the one that failed first. A rule matches a Job whose Failed condition's
  reason is in onJobFailureReasons (empty: any), whose message some onJobFailureMessagePatterns regex finds
  (empty: any; Go's regexp.MatchString, a search; an invalid pattern is skipped), and whose replicated job is in
  targetReplicatedJobs (empty: any) (ruleIsApplicable).
- No rule matching: RestartJobSet, the default action.
- FailJobSet fails the JobSet (reason FailJobSetFailurePolicyAction). RestartJobSet fails it (ReachedMaxRestarts)
  once status.restartsCountTowardsMax has reached maxRestarts, and otherwise recreates every Job, adding 1 to
  status.restarts and to restartsCountTowardsMax. RestartJobSetAndIgnoreMaxRestarts recreates every Job without
  that check, adding 1 to status.restarts only. RestartJob and RestartJobAndIgnoreMaxRestarts need the alpha
  RestartJob feature gate (off by default; the webhook refuses them) and are not modelled.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from local.modelled_fields import require_modelled
from local.trainjob.jobset_webhook import (
    FAIL_JOBSET,
    JOBSET_MODEL,
    JOBSET_SPEC_FIELDS,
    RESTART_JOBSET,
    RESTART_JOBSET_UNCOUNTED,
)
from local.trainjob.pod_failure_policy import FailedPod, JobFailure, job_failure
from workloads.job.trainjob import NODE

# pkg/constants/constants.go: the JobSet's Failed condition reasons, and its Restarting condition's.
REASON_FAILED_JOBS = "FailedJobs"
REASON_FAIL_JOBSET_ACTION = "FailJobSetFailurePolicyAction"
REASON_MAX_RESTARTS = "ReachedMaxRestarts"
RESTARTING_DEFAULT = "DefaultFailurePolicy"
RESTARTING_BY_RULE = "FailurePolicy_{}"


@dataclass(frozen=True)
class JobSetRestarts:
    """The JobSet's status.restarts and status.restartsCountTowardsMax."""

    restarts: int = 0
    counted: int = 0


@dataclass(frozen=True)
class FailedJob:
    """A child Job with its Failed condition, and the replicated job it belongs to (its JobSet label)."""

    replicated_job: str
    failure: JobFailure


class Verdict(enum.Enum):
    REPLACE_POD = "the Job replaces the pod"  # no Job failed: the podFailurePolicy ignored the failure
    RESTART = "the JobSet recreates every Job"
    FAIL = "the JobSet fails"


@dataclass(frozen=True)
class GangOutcome:
    verdict: Verdict
    restarts: JobSetRestarts  # after the action
    reason: str  # the JobSet's Failed reason, or its Restarting reason
    why: str
    counted: bool = False  # whether this restart used up one of maxRestarts


def _rule_matches(rule: Mapping[str, Any], job: FailedJob) -> bool:
    reasons = rule.get("onJobFailureReasons") or []
    if reasons and job.failure.reason not in reasons:
        return False
    patterns = rule.get("onJobFailureMessagePatterns") or []
    if patterns and not any(_search(pattern, job.failure.message) for pattern in patterns):
        return False
    targets = rule.get("targetReplicatedJobs") or []
    return not targets or job.replicated_job in targets


def _search(pattern: str, message: str) -> bool:
    try:
        return re.search(pattern, message) is not None
    except re.error:  # anyMatchFound logs an invalid pattern and goes on to the next
        return False


def first_matching_rule(
    rules: Sequence[Mapping[str, Any]], failed_jobs: Sequence[FailedJob]
) -> tuple[Mapping[str, Any] | None, FailedJob | None]:
    """findFirstFailedPolicyRuleAndJob; `failed_jobs` in the order they failed."""
    for rule in rules:
        for job in failed_jobs:
            if _rule_matches(rule, job):
                return rule, job
    return None, None


def execute_failure_policy(
    jobset_spec: Mapping[str, Any], failed_jobs: Sequence[FailedJob], restarts: JobSetRestarts
) -> GangOutcome:
    """executeFailurePolicy: what the JobSet does about its failed Jobs, given its restart counts so far."""
    if not failed_jobs:
        raise ValueError("the failure policy runs only once a Job has failed")
    policy = jobset_spec.get("failurePolicy")
    if policy is None:
        return GangOutcome(
            Verdict.FAIL, restarts, REASON_FAILED_JOBS, "no failurePolicy: a failed Job fails the JobSet"
        )
    rule, job = first_matching_rule(policy.get("rules", []), failed_jobs)
    action = RESTART_JOBSET if rule is None else rule["action"]
    job = job or failed_jobs[0]
    by = f"rule {rule['name']}" if rule is not None else "no rule matching, the default"
    if action == FAIL_JOBSET:
        return GangOutcome(Verdict.FAIL, restarts, REASON_FAIL_JOBSET_ACTION, f"{by}: FailJobSet")
    restarting = RESTARTING_BY_RULE.format(rule["name"]) if rule is not None else RESTARTING_DEFAULT
    max_restarts = int(policy.get("maxRestarts", 0))
    if action == RESTART_JOBSET:
        if restarts.counted >= max_restarts:
            why = f"{by} RestartJobSet, but the JobSet's maxRestarts ({max_restarts}) are spent"
            return GangOutcome(Verdict.FAIL, restarts, REASON_MAX_RESTARTS, why)
        after = JobSetRestarts(restarts.restarts + 1, restarts.counted + 1)
        left = max_restarts - after.counted
        why = f"{by} RestartJobSet: every pod created again (restart {after.restarts}, {left} counted restarts left)"
        return GangOutcome(Verdict.RESTART, after, restarting, why, counted=True)
    if action == RESTART_JOBSET_UNCOUNTED:
        after = replace(restarts, restarts=restarts.restarts + 1)
        why = (
            f"{by} RestartJobSetAndIgnoreMaxRestarts: every pod created again (restart {after.restarts}), "
            "not counted against maxRestarts"
        )
        return GangOutcome(Verdict.RESTART, after, restarting, why)
    raise ValueError(f"failure policy action {action!r} is not modelled (RestartJob needs an alpha feature gate)")


def trainer_job(runtime: Mapping[str, Any], replicated_job: str = NODE) -> Mapping[str, Any]:
    """The batch Job spec of one replicated job of the runtime's JobSet template."""
    for replicated in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        if replicated["name"] == replicated_job:
            return replicated["template"]["spec"]
    raise ValueError(f"the runtime has no replicated job {replicated_job!r}")


def gang_outcome(
    runtime: Mapping[str, Any],
    failed_pods: Sequence[FailedPod],
    restarts: JobSetRestarts,
    replicated_job: str = NODE,
) -> GangOutcome:
    """What follows when the Job controller finds `failed_pods` (terminal, in the order they failed) in one sync of
    the trainer step's Job, after `restarts` so far: the Job's verdict, then the JobSet's."""
    require_modelled(runtime["spec"]["template"]["spec"], JOBSET_SPEC_FIELDS, "spec.template.spec", JOBSET_MODEL)
    failure = job_failure(trainer_job(runtime, replicated_job), failed_pods)
    if failure is None:
        return GangOutcome(Verdict.REPLACE_POD, restarts, "", "the Job's podFailurePolicy ignores the failure")
    outcome = execute_failure_policy(
        runtime["spec"]["template"]["spec"], [FailedJob(replicated_job, failure)], restarts
    )
    return replace(outcome, why=f"its Job failed ({failure.reason}: {failure.message}); {outcome.why}")
