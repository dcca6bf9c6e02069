"""The batch/v1 Job's podFailurePolicy, as local/trainjob/pod_failure_policy.py models it from Kubernetes' sources:
which rule a failed pod matches (init containers included), what the Job's Failed condition then says, and what the API
server refuses in a Job's spec. One behaviour per test, on a small pod: an init container `prepare` and the container
`node`."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from local.trainjob.pod_failure_policy import (
    BACKOFF_LIMIT_MESSAGE,
    REASON_BACKOFF_LIMIT,
    REASON_POD_FAILURE_POLICY,
    ContainerStatus,
    FailedPod,
    RuleMatch,
    job_failure,
    job_spec_problems,
    match_pod_failure_policy,
    pod_exit,
)

POD: dict[str, Any] = {
    "restartPolicy": "Never",
    "initContainers": [{"name": "prepare"}, {"name": "stage"}],
    "containers": [{"name": "node"}],
}
DISRUPTED = (("DisruptionTarget", "True"),)


def exit_codes(values: list[int], container: str | None = "node", action: str = "FailJob") -> dict[str, Any]:
    requirement: dict[str, Any] = {"operator": "In", "values": values}
    if container is not None:
        requirement["containerName"] = container
    return {"action": action, "onExitCodes": requirement}


def condition(action: str = "FailJob") -> dict[str, Any]:
    return {"action": action, "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}


def job(*rules: dict[str, Any], backoff_limit: int = 0) -> dict[str, Any]:
    return {
        "backoffLimit": backoff_limit,
        "completionMode": "Indexed",
        "completions": 2,
        "podFailurePolicy": {"rules": list(rules)},
        "template": {"spec": copy.deepcopy(POD)},
    }


def failed(container: str, code: int, conditions: tuple[tuple[str, str], ...] = ()) -> FailedPod:
    return pod_exit(POD, "run-node-0-1-abcde", "training", container, code, conditions)


# --- what the kubelet reports


def test_an_init_container_failure_leaves_the_main_container_waiting() -> None:
    pod = failed("stage", 4)
    assert pod.init_containers == (ContainerStatus("prepare", 0), ContainerStatus("stage", 4))
    assert pod.containers == (ContainerStatus("node", None),)


def test_a_main_container_exit_follows_init_containers_that_all_exited_0() -> None:
    pod = failed("node", 3)
    assert [state.exit_code for state in pod.init_containers] == [0, 0]
    assert pod.containers == (ContainerStatus("node", 3),)


# --- matchPodFailurePolicy


def test_an_exit_code_rule_names_the_container_exit_code_and_rule_index_in_its_message() -> None:
    match = match_pod_failure_policy(job(condition(), exit_codes([2, 3]))["podFailurePolicy"], failed("node", 3))
    assert match == RuleMatch(
        "FailJob",
        1,
        "Container node for pod training/run-node-0-1-abcde failed with exit code 3 matching FailJob rule at index 1",
    )


def test_a_rule_naming_the_main_container_does_not_match_an_init_containers_exit() -> None:
    match = match_pod_failure_policy(job(exit_codes([4]))["podFailurePolicy"], failed("stage", 4))
    assert match.action is None


def test_a_rule_naming_an_init_container_matches_its_exit() -> None:
    match = match_pod_failure_policy(job(exit_codes([4], container="stage"))["podFailurePolicy"], failed("stage", 4))
    assert match.action == "FailJob" and match.message is not None and match.message.startswith("Container stage ")


def test_a_rule_naming_no_container_matches_an_init_containers_exit() -> None:
    match = match_pod_failure_policy(job(exit_codes([4], container=None))["podFailurePolicy"], failed("stage", 4))
    assert match.action == "FailJob"


def test_exit_0_matches_no_exit_code_rule_even_not_in() -> None:
    pod = FailedPod("p", "training", (), (ContainerStatus("node", 0),), DISRUPTED)
    rule = {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [1]}}
    assert match_pod_failure_policy({"rules": [rule]}, pod).action is None


def test_a_condition_rule_matches_a_pod_with_that_condition_and_says_so() -> None:
    match = match_pod_failure_policy(
        job(exit_codes([2]), condition())["podFailurePolicy"], failed("node", 143, DISRUPTED)
    )
    assert (
        match.message
        == "Pod training/run-node-0-1-abcde has condition DisruptionTarget matching FailJob rule at index 1"
    )


def test_a_condition_rule_needs_the_conditions_status_too() -> None:
    match = match_pod_failure_policy(
        job(condition())["podFailurePolicy"], failed("node", 143, (("DisruptionTarget", "False"),))
    )
    assert match.action is None


def test_the_first_matching_rule_wins() -> None:
    policy = job(condition("Ignore"), exit_codes([3]))["podFailurePolicy"]
    assert match_pod_failure_policy(policy, failed("node", 3, DISRUPTED)).action == "Ignore"


# --- the Job's verdict in one sync


def test_with_backoff_limit_0_any_unmatched_failure_fails_the_job() -> None:
    failure = job_failure(job(exit_codes([2])), [failed("node", 1)])
    assert failure is not None and (failure.reason, failure.message) == (REASON_BACKOFF_LIMIT, BACKOFF_LIMIT_MESSAGE)


def test_an_init_container_failure_fails_the_job_by_the_backoff_limit_under_a_rule_for_node() -> None:
    failure = job_failure(job(exit_codes([4])), [failed("stage", 4)])
    assert failure is not None and failure.reason == REASON_BACKOFF_LIMIT


def test_a_failjob_match_wins_over_the_backoff_limit_whatever_pod_failed_first() -> None:
    failure = job_failure(job(condition()), [failed("node", 1), failed("node", 143, DISRUPTED)])
    assert failure is not None and failure.reason == REASON_POD_FAILURE_POLICY


def test_an_ignored_failure_is_not_counted_and_the_job_goes_on() -> None:
    assert job_failure(job(condition("Ignore")), [failed("node", 143, DISRUPTED)]) is None


def test_a_failure_below_the_backoff_limit_lets_the_job_go_on() -> None:
    assert job_failure(job(backoff_limit=1), [failed("node", 1)]) is None


# --- the Job API's validation


def test_the_small_job_passes_the_job_apis_validation() -> None:
    assert job_spec_problems("run-node-0", job(exit_codes([2, 3]), condition())) == []


def test_a_pod_failure_policy_needs_restart_policy_never() -> None:
    spec = job(condition())
    spec["template"]["spec"]["restartPolicy"] = "OnFailure"
    assert job_spec_problems("run-node-0", spec) == [
        "template.spec.restartPolicy: only 'Never' is supported when podFailurePolicy is specified"
    ]


def test_a_rule_must_name_a_container_the_pod_has() -> None:
    (problem,) = job_spec_problems("run-node-0", job(exit_codes([2], container="trainer")))
    assert "containerName: 'trainer' must be one of the container or initContainer names" in problem


def test_exit_code_values_must_be_ordered() -> None:
    (problem,) = job_spec_problems("run-node-0", job(exit_codes([3, 2])))
    assert problem.endswith("values: must be ordered")


def test_exit_code_values_must_be_unique() -> None:
    (problem,) = job_spec_problems("run-node-0", job(exit_codes([2, 2])))
    assert problem.endswith("values: duplicate values")


def test_exit_code_0_is_refused_with_in() -> None:
    (problem,) = job_spec_problems("run-node-0", job(exit_codes([0, 2])))
    assert problem.endswith("must not be 0 for the In operator")


def test_a_rule_needs_exactly_one_of_exit_codes_and_conditions() -> None:
    both = {**exit_codes([2]), "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    assert "specifying both OnExitCodes and OnPodConditions is not supported" in job_spec_problems("j", job(both))[0]
    neither = {"action": "FailJob"}
    assert "specifying one of OnExitCodes and OnPodConditions is required" in job_spec_problems("j", job(neither))[0]


def test_an_unknown_action_is_refused() -> None:
    (problem,) = job_spec_problems("run-node-0", job(exit_codes([2], action="Restart")))
    assert "'Restart' is not one of" in problem


def test_fail_index_needs_a_backoff_limit_per_index() -> None:
    (problem,) = job_spec_problems("run-node-0", job(exit_codes([2], action="FailIndex")))
    assert problem.endswith("FailIndex requires the backoffLimitPerIndex to be set")


def test_a_condition_status_must_be_true_false_or_unknown() -> None:
    rule = {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "Yes"}]}
    (problem,) = job_spec_problems("run-node-0", job(rule))
    assert "status: 'Yes' is not one of" in problem


def test_more_than_20_rules_are_refused() -> None:
    assert "podFailurePolicy.rules: more than 20" in job_spec_problems("j", job(*[condition()] * 21))


@pytest.mark.parametrize("name", ["a" * 62, "Run"])
def test_the_last_indexed_pods_host_name_must_be_a_dns_label(name: str) -> None:
    (problem,) = job_spec_problems(name, job(condition()))
    assert problem.startswith("metadata.name: ") and f"{name}-1" in problem
