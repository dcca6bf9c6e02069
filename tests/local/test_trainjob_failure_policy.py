"""What follows a TrainJob pod's failure, as local/trainjob/jobset_policy.py models JobSet v0.12.0's failure policy on
top of the Job's podFailurePolicy: first JobSet's own semantics on small policies, then every stack's rendered runtime,
pod by pod (the node container's exits, each init container's failure, a disruption)."""

from __future__ import annotations

from typing import Any

import pytest

from local.trainjob.jobset_policy import (
    REASON_FAIL_JOBSET_ACTION,
    REASON_FAILED_JOBS,
    REASON_MAX_RESTARTS,
    FailedJob,
    GangOutcome,
    JobSetRestarts,
    Verdict,
    execute_failure_policy,
    gang_outcome,
)
from local.trainjob.pod_failure_policy import BACKOFF_LIMIT_MESSAGE, JobFailure, pod_exit
from tests.workloads.job.trainjob_stacks import STACKS, trainjob_spec_of
from trainer.base.pod.exits import EXIT_BACKEND_LOST, EXIT_PERMANENT, EXIT_STAGING_FAILED, FINAL_EXITS, exit_for_signal
from workloads.job.trainjob import training_runtime

BACKOFF = FailedJob("node", JobFailure("BackoffLimitExceeded", BACKOFF_LIMIT_MESSAGE))
DISRUPTED = (("DisruptionTarget", "True"),)


def policy(*rules: dict[str, Any], max_restarts: int = 2) -> dict[str, Any]:
    return {"failurePolicy": {"maxRestarts": max_restarts, "rules": list(rules)}}


def by_pod_policy(message: str) -> FailedJob:
    return FailedJob("node", JobFailure("PodFailurePolicy", message))


# --- JobSet v0.12.0 pkg/controllers/failure_policy.go


def test_without_a_failure_policy_a_failed_job_fails_the_jobset() -> None:
    outcome = execute_failure_policy({}, [BACKOFF], JobSetRestarts())
    assert (outcome.verdict, outcome.reason) == (Verdict.FAIL, REASON_FAILED_JOBS)


def test_with_no_rule_matching_the_default_restart_counts() -> None:
    outcome = execute_failure_policy(policy(), [BACKOFF], JobSetRestarts())
    assert (outcome.verdict, outcome.restarts, outcome.counted) == (Verdict.RESTART, JobSetRestarts(1, 1), True)


def test_once_counted_restarts_reach_max_restarts_the_next_failure_fails_the_jobset() -> None:
    outcome = execute_failure_policy(policy(max_restarts=2), [BACKOFF], JobSetRestarts(5, 2))
    assert (outcome.verdict, outcome.reason) == (Verdict.FAIL, REASON_MAX_RESTARTS)


def test_restarts_that_ignore_max_restarts_are_not_counted_and_not_limited() -> None:
    rule = {"name": "any", "action": "RestartJobSetAndIgnoreMaxRestarts"}
    outcome = execute_failure_policy(policy(rule, max_restarts=0), [BACKOFF], JobSetRestarts(7, 0))
    assert (outcome.verdict, outcome.restarts, outcome.counted) == (Verdict.RESTART, JobSetRestarts(8, 0), False)
    assert outcome.reason == "FailurePolicy_any"


def test_a_rule_must_match_the_reason() -> None:
    rule = {"name": "final", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}
    assert execute_failure_policy(policy(rule), [BACKOFF], JobSetRestarts()).verdict is Verdict.RESTART


def test_a_rule_with_message_patterns_must_find_one_in_the_message() -> None:
    rule = {"name": "final", "action": "FailJobSet", "onJobFailureMessagePatterns": ["exit code 4"]}
    assert execute_failure_policy(policy(rule), [by_pod_policy("... exit code 3 ...")], JobSetRestarts()).verdict is (
        Verdict.RESTART
    )
    outcome = execute_failure_policy(policy(rule), [by_pod_policy("... exit code 4 ...")], JobSetRestarts())
    assert (outcome.verdict, outcome.reason) == (Verdict.FAIL, REASON_FAIL_JOBSET_ACTION)


def test_an_invalid_message_pattern_matches_nothing() -> None:
    rule = {"name": "final", "action": "FailJobSet", "onJobFailureMessagePatterns": ["("]}
    assert execute_failure_policy(policy(rule), [by_pod_policy("(")], JobSetRestarts()).verdict is Verdict.RESTART


def test_a_rule_must_target_the_failed_jobs_replicated_job() -> None:
    rule = {"name": "final", "action": "FailJobSet", "targetReplicatedJobs": ["launcher"]}
    assert execute_failure_policy(policy(rule), [BACKOFF], JobSetRestarts()).verdict is Verdict.RESTART


def test_the_first_rule_any_failed_job_matches_wins_over_the_order_of_the_failures() -> None:
    final = {"name": "final", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}
    restart = {"name": "restart", "action": "RestartJobSet"}
    outcome = execute_failure_policy(policy(final, restart), [BACKOFF, by_pod_policy("m")], JobSetRestarts())
    assert outcome.verdict is Verdict.FAIL


# --- every stack's runtime


def runtime_of(stack: str) -> dict[str, Any]:
    return training_runtime(trainjob_spec_of(stack))


def pod_spec(runtime: dict[str, Any]) -> dict[str, Any]:
    (replicated,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    return replicated["template"]["spec"]["template"]["spec"]


def outcome_of(
    stack: str, container: str, code: int, conditions: tuple[tuple[str, str], ...] = (), restarts: int = 0
) -> GangOutcome:
    runtime = runtime_of(stack)
    pod = pod_exit(pod_spec(runtime), f"fsdp-{stack}-node-0-0-abcde", "training", container, code, conditions)
    return gang_outcome(runtime, [pod], JobSetRestarts(restarts, restarts))


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("code", FINAL_EXITS)
def test_a_final_launcher_exit_fails_the_trainjob_at_once(stack: str, code: int) -> None:
    outcome = outcome_of(stack, "node", code)
    assert (outcome.verdict, outcome.reason) == (Verdict.FAIL, REASON_FAIL_JOBSET_ACTION), outcome.why


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("code", [EXIT_PERMANENT, EXIT_BACKEND_LOST, exit_for_signal(9), exit_for_signal(15)])
def test_any_other_exit_restarts_the_gang_counted_up_to_max_restarts(stack: str, code: int) -> None:
    first = outcome_of(stack, "node", code)
    assert (first.verdict, first.counted) == (Verdict.RESTART, True), first.why
    last = outcome_of(stack, "node", code, restarts=trainjob_spec_of(stack).max_restarts)
    assert (last.verdict, last.reason) == (Verdict.FAIL, REASON_MAX_RESTARTS)


@pytest.mark.parametrize("stack", STACKS)
def test_a_disrupted_pod_restarts_the_gang_without_using_up_max_restarts(stack: str) -> None:
    spent = trainjob_spec_of(stack).max_restarts  # even with every counted restart spent
    outcome = outcome_of(stack, "node", exit_for_signal(15), DISRUPTED, restarts=spent)
    assert (outcome.verdict, outcome.counted, outcome.restarts.counted) == (Verdict.RESTART, False, spent), outcome.why


@pytest.mark.parametrize("stack", STACKS)
def test_a_final_exit_of_a_disrupted_pod_still_ends_the_run(stack: str) -> None:
    assert outcome_of(stack, "node", FINAL_EXITS[-1], DISRUPTED).verdict is Verdict.FAIL


@pytest.mark.parametrize("stack", STACKS)
def test_a_failed_init_container_costs_a_counted_gang_restart(stack: str) -> None:
    """restartPolicy Never: the pod fails, the node container never ran, so no exit-code rule for it matches; the Job
    fails on backoffLimit 0 and the JobSet's default restarts the gang, counted (staging, where it still runs in an
    init container, has a rule of its own: see the test below)."""
    runtime = runtime_of(stack)
    for container in pod_spec(runtime).get("initContainers", []):
        if "trainer.stage" in container.get("command", []):
            continue
        outcome = outcome_of(stack, container["name"], EXIT_PERMANENT)
        assert (outcome.verdict, outcome.counted) == (Verdict.RESTART, True), outcome.why


@pytest.mark.parametrize("stack", STACKS)
def test_a_staging_failure_ends_the_run_wherever_staging_runs(stack: str) -> None:
    runtime = runtime_of(stack)
    stages = [c["name"] for c in pod_spec(runtime).get("initContainers", []) if "trainer.stage" in c.get("command", [])]
    for container in ["node", *stages]:
        assert outcome_of(stack, container, EXIT_STAGING_FAILED).verdict is Verdict.FAIL
