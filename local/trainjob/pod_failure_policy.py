"""What a batch/v1 Job does with its failed pods under a podFailurePolicy, and what the API server refuses in a Job.

Pure and torch-free, read from Kubernetes' sources (the behaviour is the same in 1.33 to 1.35):
- pkg/controller/job/pod_failure_policy.go matchPodFailurePolicy: the rules in order, the first that matches wins.
  onExitCodes looks at terminated containers with a non-zero exit, the pod's containers first and then its init
  containers (matchOnExitCodes); containerName, where given, must equal the container's name, so an init
  container matches a rule that names it or names none. A container that never ran (the main container of a pod
  whose init container failed: still waiting) has no exit code and matches nothing. onPodConditions matches a
  condition of the same type and status. FailJob fails the Job with reason PodFailurePolicy and a message that
  names the container and exit code, or the condition, and the rule's index; Ignore leaves the failure
  uncounted; Count counts it (as no match does).
- pkg/controller/job/job_controller.go syncJob: a sync that finds failed pods fails the Job on the first FailJob
  match among them (getFailJobMessage) before it compares the counted failures with backoffLimit
  (`failed > backoffLimit`, reason BackoffLimitExceeded). The pods it reads are terminal (phase Failed): with a
  podFailurePolicy a pod being deleted counts only once it has stopped. Under restartPolicy Never a failed init
  container fails its pod (the main containers never start).
- pkg/apis/batch/validation/validation.go validateJobSpec, validatePodFailurePolicy: what the API server refuses
  in a Job's spec (the JobSet controller's Jobs go through it; a refused Job is never created).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from local.modelled_fields import WHOLE, Fields
from local.pod_status import ContainerStatus, exited_container_statuses

FAIL_JOB, FAIL_INDEX, IGNORE, COUNT = "FailJob", "FailIndex", "Ignore", "Count"
ACTIONS = (COUNT, FAIL_INDEX, FAIL_JOB, IGNORE)
OPERATORS = ("In", "NotIn")
CONDITION_STATUSES = ("False", "True", "Unknown")
NEVER, ON_FAILURE = "Never", "OnFailure"
# batch/v1 JobConditionReason values (k8s.io/api/batch/v1/types.go) and the controller's message for the limit.
REASON_POD_FAILURE_POLICY = "PodFailurePolicy"
REASON_BACKOFF_LIMIT = "BackoffLimitExceeded"
BACKOFF_LIMIT_MESSAGE = "Job has reached the specified backoff limit"
DEFAULT_BACKOFF_LIMIT = 6  # JobSpec.backoffLimit's default
# The pod condition the API server, scheduler, taint manager, pod GC and kubelet add to a pod they are about to
# stop for a disruption (k8s.io/api/core/v1 DisruptionTarget: eviction, preemption, taint-based deletion, ...).
DISRUPTION_TARGET = "DisruptionTarget"
# validation.go: maxPodFailurePolicyRules, maxPodFailurePolicyOnExitCodesValues,
# maxPodFailurePolicyOnPodConditionsPatterns.
MAX_RULES, MAX_EXIT_CODE_VALUES, MAX_CONDITION_PATTERNS = 20, 255, 20
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


# The Job spec fields this model reads (local/modelled_fields.py): the pod template is the strict schema's to judge.
JOB_SPEC_FIELDS: Fields = {
    "backoffLimit": WHOLE,
    "parallelism": WHOLE,
    "completions": WHOLE,
    "completionMode": WHOLE,
    "podFailurePolicy": {
        "rules": [
            {
                "action": WHOLE,
                "onExitCodes": {"containerName": WHOLE, "operator": WHOLE, "values": WHOLE},
                "onPodConditions": [{"type": WHOLE, "status": WHOLE}],
            }
        ]
    },
    "template": WHOLE,
}


@dataclass(frozen=True)
class FailedPod:
    """A pod in phase Failed, as the Job controller reads it: container statuses and conditions (type, status)."""

    name: str
    namespace: str
    init_containers: tuple[ContainerStatus, ...]
    containers: tuple[ContainerStatus, ...]
    conditions: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class RuleMatch:
    """The podFailurePolicy's verdict on a failed pod: the rule's action and index (None: no rule matched) and, for
    FailJob, the message the Job's Failed condition carries."""

    action: str | None = None
    index: int | None = None
    message: str | None = None


@dataclass(frozen=True)
class JobFailure:
    """The Job's Failed condition: reason and message."""

    reason: str
    message: str


def pod_exit(
    pod_spec: Mapping[str, Any],
    pod_name: str,
    namespace: str,
    container: str,
    code: int,
    conditions: Sequence[tuple[str, str]] = (),
) -> FailedPod:
    """The failed pod of template spec `pod_spec` whose `container` (an init container or a main one) exited with
    `code`, its statuses as the kubelet reports them under restartPolicy Never (local/pod_status.py)."""
    inits, mains = exited_container_statuses(pod_spec, container, code)
    return FailedPod(pod_name, namespace, inits, mains, tuple(conditions))


def _exit_code_matches(code: int, requirement: Mapping[str, Any]) -> bool:
    values = requirement.get("values", [])
    if requirement.get("operator") == "In":
        return code in values
    if requirement.get("operator") == "NotIn":
        return code not in values
    return False


def _matching_container(pod: FailedPod, requirement: Mapping[str, Any]) -> ContainerStatus | None:
    """matchOnExitCodes: the first terminated container with a non-zero exit that the requirement matches, the
    main containers before the init containers."""
    name = requirement.get("containerName")
    for status in (*pod.containers, *pod.init_containers):
        if status.exit_code is None or status.exit_code == 0:
            continue
        if (name is None or name == status.name) and _exit_code_matches(status.exit_code, requirement):
            return status
    return None


def _matching_condition(pod: FailedPod, patterns: Sequence[Mapping[str, Any]]) -> str | None:
    for condition_type, status in pod.conditions:
        if any(p.get("type") == condition_type and p.get("status") == status for p in patterns):
            return condition_type
    return None


def match_pod_failure_policy(policy: Mapping[str, Any] | None, pod: FailedPod) -> RuleMatch:
    """matchPodFailurePolicy: the first rule that matches the failed pod, and the Job's message for FailJob."""
    for index, rule in enumerate((policy or {}).get("rules", [])):
        action = rule.get("action")
        if rule.get("onExitCodes") is not None:
            status = _matching_container(pod, rule["onExitCodes"])
            if status is None:
                continue
            message = (
                f"Container {status.name} for pod {pod.namespace}/{pod.name} failed with exit code "
                f"{status.exit_code} matching {action} rule at index {index}"
            )
        elif rule.get("onPodConditions"):
            condition = _matching_condition(pod, rule["onPodConditions"])
            if condition is None:
                continue
            message = (
                f"Pod {pod.namespace}/{pod.name} has condition {condition} matching {action} rule at index {index}"
            )
        else:
            continue
        if action in (IGNORE, COUNT, FAIL_INDEX):
            return RuleMatch(action, index)
        if action == FAIL_JOB:
            return RuleMatch(action, index, message)
    return RuleMatch()


def job_failure(
    job_spec: Mapping[str, Any], failed_pods: Sequence[FailedPod], failed_before: int = 0
) -> JobFailure | None:
    """The Job's Failed condition after one sync that finds `failed_pods` newly failed (`failed_before` failures
    counted already), or None if the Job goes on (and creates pods in their place). A FailJob match among them
    wins over the backoff limit, whichever pod it is."""
    if job_spec.get("backoffLimitPerIndex") is not None:
        raise ValueError("backoffLimitPerIndex (reason FailedIndexes) is not modelled")
    policy = job_spec.get("podFailurePolicy")
    matches = [match_pod_failure_policy(policy, pod) for pod in failed_pods]
    for match in matches:
        if match.action == FAIL_JOB and match.message is not None:
            return JobFailure(REASON_POD_FAILURE_POLICY, match.message)
    counted = failed_before + sum(1 for match in matches if match.action != IGNORE)
    if counted > job_spec.get("backoffLimit", DEFAULT_BACKOFF_LIMIT):
        return JobFailure(REASON_BACKOFF_LIMIT, BACKOFF_LIMIT_MESSAGE)
    return None


def _qualified_name_problems(name: str) -> list[str]:
    prefix, _, local = name.rpartition("/")
    problems = []
    if prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.fullmatch(prefix)):
        problems.append(f"prefix {prefix!r} is not a DNS-1123 subdomain")
    if not local or len(local) > 63 or not QUALIFIED_NAME.fullmatch(local):
        problems.append(f"{local!r} is not a qualified name (at most 63 alphanumerics, '-', '_' or '.')")
    return problems


def _exit_codes_problems(path: str, requirement: Mapping[str, Any], containers: set[str]) -> list[str]:
    problems = []
    operator = requirement.get("operator")
    if operator not in OPERATORS:
        problems.append(f"{path}.operator: {operator!r} is not one of {', '.join(OPERATORS)}")
    name = requirement.get("containerName")
    if name is not None and name not in containers:
        problems.append(f"{path}.containerName: {name!r} must be one of the container or initContainer names")
    values = list(requirement.get("values", []))
    if not values:
        problems.append(f"{path}.values: at least one value is required")
    elif len(values) > MAX_EXIT_CODE_VALUES:
        problems.append(f"{path}.values: more than {MAX_EXIT_CODE_VALUES}")
    if operator == "In" and 0 in values:
        problems.append(f"{path}.values: must not be 0 for the In operator")
    if len(set(values)) != len(values):
        problems.append(f"{path}.values: duplicate values")
    if values != sorted(values):
        problems.append(f"{path}.values: must be ordered")
    return problems


def _conditions_problems(path: str, patterns: Sequence[Mapping[str, Any]]) -> list[str]:
    problems = (
        [f"{path}: more than {MAX_CONDITION_PATTERNS} patterns"] if len(patterns) > MAX_CONDITION_PATTERNS else []
    )
    for j, pattern in enumerate(patterns):
        problems += [f"{path}[{j}].type: {p}" for p in _qualified_name_problems(str(pattern.get("type", "")))]
        if pattern.get("status") not in CONDITION_STATUSES:
            problems.append(
                f"{path}[{j}].status: {pattern.get('status')!r} is not one of {', '.join(CONDITION_STATUSES)}"
            )
    return problems


def pod_failure_policy_problems(job_spec: Mapping[str, Any]) -> list[str]:
    """validatePodFailurePolicy: every rule's action, exactly one of onExitCodes and onPodConditions, and each."""
    rules = job_spec["podFailurePolicy"].get("rules", [])
    pod = job_spec["template"]["spec"]
    containers = {c["name"] for c in [*pod.get("initContainers", []), *pod["containers"]]}
    problems = [f"podFailurePolicy.rules: more than {MAX_RULES}"] if len(rules) > MAX_RULES else []
    for i, rule in enumerate(rules):
        path = f"podFailurePolicy.rules[{i}]"
        action = rule.get("action")
        if action == FAIL_INDEX and job_spec.get("backoffLimitPerIndex") is None:
            problems.append(f"{path}.action: FailIndex requires the backoffLimitPerIndex to be set")
        elif action not in ACTIONS:
            problems.append(f"{path}.action: {action!r} is not one of {', '.join(ACTIONS)}")
        exits, conditions = rule.get("onExitCodes"), rule.get("onPodConditions") or []
        if exits is not None and conditions:
            problems.append(f"{path}: specifying both OnExitCodes and OnPodConditions is not supported")
        if exits is None and not conditions:
            problems.append(f"{path}: specifying one of OnExitCodes and OnPodConditions is required")
        if exits is not None:
            problems += _exit_codes_problems(f"{path}.onExitCodes", exits, containers)
        problems += _conditions_problems(f"{path}.onPodConditions", conditions)
    return problems


def job_spec_problems(job_name: str, job_spec: Mapping[str, Any]) -> list[str]:
    """What validateJobSpec (and ValidateJob's indexed host name check) refuses in the Job `job_name` would have."""
    problems = []
    restart_policy = job_spec["template"]["spec"].get("restartPolicy", "")
    if restart_policy not in (NEVER, ON_FAILURE):
        problems.append(f"template.spec.restartPolicy: {restart_policy!r}: valid values: OnFailure, Never")
    elif job_spec.get("podFailurePolicy") is not None and restart_policy != NEVER:
        problems.append(f"template.spec.restartPolicy: only {NEVER!r} is supported when podFailurePolicy is specified")
    for key in ("backoffLimit", "parallelism", "completions"):
        if job_spec.get(key, 0) < 0:
            problems.append(f"{key}: must be greater than or equal to 0")
    if job_spec.get("podFailurePolicy") is not None:
        problems += pod_failure_policy_problems(job_spec)
    completions = job_spec.get("completions")
    if job_spec.get("completionMode") == "Indexed" and completions:
        host = f"{job_name}-{completions - 1}"  # the pod host name of the last index
        if len(host) > 63 or not DNS1123_LABEL.fullmatch(host):
            problems.append(f"metadata.name: will not able to create pod with invalid DNS label: {host}")
    return problems
