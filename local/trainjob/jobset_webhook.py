"""JobSet's admission, kubernetes-sigs/jobset v0.12.0, on the JobSet that Kubeflow Trainer v2.3.0 builds from a
TrainJob and its runtime.

Pure and torch-free. Trainer's jobset plugin creates a JobSet named after the TrainJob, in its namespace, whose spec
is the runtime's JobSet template with the trainer step's parallelism and completions set to the TrainJob's numNodes
(kubeflow/trainer v2.3.0 pkg/runtime/framework/plugins/jobset/jobset.go Build, and the torch plugin's
EnforceMLPolicy). The JobSet then goes through, in order:
- the CRD's defaults (api/jobset/v1alpha2/jobset_types.go: groupName "default", replicas 1, restartStrategy
  Recreate) and the mutating webhook (pkg/webhooks/jobset_webhook.go Default: completionMode Indexed, pod
  restartPolicy OnFailure where unset, failure rules without a name named failurePolicyRuleN);
- the CRD's enum on rule actions, and the validating webhook (ValidateCreate, validateFailurePolicy).
A refused JobSet is never created: Trainer's controller retries the apply, with a Warning event, for ever, while
the TrainJob and its runtime stay accepted. Trainer's webhooks do not run these checks first.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from local.modelled_fields import WHOLE, Fields, Only, require_modelled
from local.trainjob.pod_failure_policy import (
    JOB_SPEC_FIELDS,
    REASON_BACKOFF_LIMIT,
    REASON_POD_FAILURE_POLICY,
)
from stack.names import DNS_1035_LABEL, DNS_LABEL_MAX_LENGTH
from workloads.job.trainjob import NODE

# pkg/webhooks/jobset_webhook.go: the rule name's length bounds and pattern (ruleNameFmt).
MIN_RULE_NAME, MAX_RULE_NAME = 1, 128
RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
# validOnJobFailureReasons: the batch/v1 JobConditionReason values a rule may name.
VALID_FAILURE_REASONS = (
    REASON_BACKOFF_LIMIT,
    "DeadlineExceeded",
    "FailedIndexes",
    "MaxFailedIndexesExceeded",
    REASON_POD_FAILURE_POLICY,
)
FAIL_JOBSET = "FailJobSet"
RESTART_JOBSET = "RestartJobSet"
RESTART_JOBSET_UNCOUNTED = "RestartJobSetAndIgnoreMaxRestarts"
RESTART_JOB, RESTART_JOB_UNCOUNTED = "RestartJob", "RestartJobAndIgnoreMaxRestarts"
# The CRD's enum on FailurePolicyRule.action.
ACTIONS = (FAIL_JOBSET, RESTART_JOBSET, RESTART_JOBSET_UNCOUNTED, RESTART_JOB, RESTART_JOB_UNCOUNTED)
# pkg/features/features.go: RestartJob and InPlaceRestart are alpha, off unless the JobSet install turns them on.
FEATURES_OFF_BY_DEFAULT = frozenset({"RestartJob", "InPlaceRestart"})
DEFAULT_GROUP = "default"
DEFAULT_RULE_NAME = "failurePolicyRule{}"  # defaultRuleNameFmt
POD_NAME_SUFFIX = "-abcde"  # the 5 random characters the Job controller appends to a pod's name


# The JobSet spec fields this model reads, defaults included (local/modelled_fields.py): no successPolicy (the local
# run's JobSet succeeds when every pod has), no startupPolicy, coordinator, network options but the subdomain's name,
# managedBy, suspend or TTL; of the restart strategies, Recreate alone.
JOBSET_SPEC_FIELDS: Fields = {
    "replicatedJobs": [
        {
            "name": WHOLE,
            "replicas": WHOLE,
            "groupName": WHOLE,
            "dependsOn": [{"name": WHOLE, "status": WHOLE}],
            "template": {"metadata": WHOLE, "spec": JOB_SPEC_FIELDS},
        }
    ],
    "network": {"subdomain": WHOLE},
    "failurePolicy": {
        "maxRestarts": WHOLE,
        "restartStrategy": Only(("Recreate",)),
        "rules": [
            {
                "name": WHOLE,
                "action": WHOLE,
                "onJobFailureReasons": WHOLE,
                "onJobFailureMessagePatterns": WHOLE,
                "targetReplicatedJobs": WHOLE,
            }
        ],
    },
}
JOBSET_MODEL = "the JobSet v0.12.0 model (local/trainjob/jobset_webhook.py, local/trainjob/jobset_policy.py)"


class JobSetAdmissionError(Exception):
    """What JobSet's admission said no to, each problem as the webhook states it."""

    def __init__(self, name: str, problems: list[str]) -> None:
        super().__init__(f'JobSet.jobset.x-k8s.io "{name}" is invalid: ' + "; ".join(problems))
        self.problems = problems


def trainer_jobset(runtime: Mapping[str, Any], trainjob: Mapping[str, Any]) -> dict[str, Any]:
    """The JobSet Trainer v2 creates for `trainjob` from `runtime`: its name and namespace, the runtime's JobSet
    template, and the trainer step ("node") run as numNodes indexed pods."""
    spec = copy.deepcopy(runtime["spec"]["template"]["spec"])
    num_nodes = trainjob["spec"]["trainer"]["numNodes"]
    for replicated in spec.get("replicatedJobs", []):
        if replicated["name"] == NODE:
            replicated["template"]["spec"].update(parallelism=num_nodes, completions=num_nodes)
    metadata = {"name": trainjob["metadata"]["name"], "namespace": trainjob["metadata"].get("namespace", "default")}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": metadata, "spec": spec}


def defaulted(jobset: Mapping[str, Any]) -> dict[str, Any]:
    """The JobSet as the CRD's defaults and the mutating webhook leave it."""
    result = copy.deepcopy(dict(jobset))
    spec = result["spec"]
    for replicated in spec.get("replicatedJobs", []):
        replicated.setdefault("groupName", DEFAULT_GROUP)
        replicated.setdefault("replicas", 1)
        job = replicated["template"]["spec"]
        job.setdefault("completionMode", "Indexed")
        job["template"]["spec"].setdefault("restartPolicy", "OnFailure")
    policy = spec.get("failurePolicy")
    if policy is not None:
        policy.setdefault("restartStrategy", "Recreate")
        for index, rule in enumerate(policy.get("rules", [])):
            if not rule.get("name"):
                rule["name"] = DEFAULT_RULE_NAME.format(index)
    return result


def _dns1035_problems(value: str, too_long: str) -> list[str]:
    problems = [too_long] if len(value) > DNS_LABEL_MAX_LENGTH else []
    if not DNS_1035_LABEL.fullmatch(value):
        problems.append(
            f"{value!r}: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
            "with an alphabetic character, and end with an alphanumeric character"
        )
    return problems


def replicated_job_problems(name: str, index: int, replicated: Mapping[str, Any]) -> list[str]:
    """The names a replicated job generates: its group, its Jobs (<jobset>-<rjob>-<index>) and, for an indexed Job
    with completions, its pods (<jobset>-<rjob>-<job index>-<pod index>-<5 characters>), each a DNS-1035 label."""
    path = f"spec.replicatedJobs[{index}]"
    job = replicated["template"]["spec"]
    replicas = replicated.get("replicas", 1)
    problems = []
    if job.get("parallelism", 1) * replicas > 2**31 - 1:
        problems.append(f"{path}: the product of replicas and parallelism must not exceed {2**31 - 1}")
    group_too_long = f"{path}.groupName: .spec.replicatedJob[].groupName is too long, must be less than 63 characters"
    problems += _dns1035_problems(replicated.get("groupName", DEFAULT_GROUP), group_too_long)
    longest_job = f"{name}-{replicated['name']}-{replicas - 1}"
    job_too_long = (
        f"{path}.name: JobSet name is too long, job names generated for this JobSet will exceed 63 characters"
    )
    problems += _dns1035_problems(longest_job, job_too_long)
    if job.get("completionMode") == "Indexed" and job.get("completions") is not None:
        longest_pod = f"{longest_job}-{job['completions'] - 1}{POD_NAME_SUFFIX}"
        pod_too_long = (
            f"{path}.name: JobSet name is too long, pod names generated for this JobSet will exceed 63 characters"
        )
        problems += _dns1035_problems(longest_pod, pod_too_long)
    return problems


def failure_policy_problems(spec: Mapping[str, Any], features_on: frozenset[str] = frozenset()) -> list[str]:
    """validateFailurePolicy, with the CRD's enum on actions: names, actions, reasons and target jobs."""
    policy = spec["failurePolicy"]
    rules = policy.get("rules", [])
    problems = []
    if policy.get("restartStrategy") == "InPlaceRestart" and "InPlaceRestart" not in features_on:
        problems.append("InPlaceRestart restart strategy cannot be set when InPlaceRestart feature gate is disabled")
    if (
        any(rule.get("action") in (RESTART_JOB, RESTART_JOB_UNCOUNTED) for rule in rules)
        and "RestartJob" not in features_on
    ):
        return [
            *problems,
            "RestartJob and RestartJobAndIgnoreMaxRestarts failure policy actions are not allowed "
            "when RestartJob feature gate is disabled",
        ]
    replicated_jobs = {replicated["name"] for replicated in spec.get("replicatedJobs", [])}
    indices_by_name: dict[str, list[int]] = {}
    for index, rule in enumerate(rules):
        name = rule.get("name", "")
        if not MIN_RULE_NAME <= len(name) <= MAX_RULE_NAME:
            problems.append(
                f"invalid failure policy rule name of length {len(name)}, the rule name must be at least "
                f"{MIN_RULE_NAME} characters long and at most {MAX_RULE_NAME} characters long"
            )
        indices_by_name.setdefault(name, []).append(index)
        if not RULE_NAME.fullmatch(name):
            problems.append(
                f"invalid failure policy rule name '{name}', a failure policy rule name must start with an "
                "alphabetic character, optionally followed by a string of alphanumeric characters or "
                "'_,:', and must end with an alphanumeric character or '_'"
            )
        if rule.get("action") not in ACTIONS:
            problems.append(
                f"spec.failurePolicy.rules[{index}].action: Unsupported value: {rule.get('action')!r}: "
                f"supported values: {', '.join(ACTIONS)}"
            )
        for target in rule.get("targetReplicatedJobs", []):
            if target not in replicated_jobs:
                problems.append(
                    f"invalid replicatedJob name '{target}' in failure policy does not appear in .spec.ReplicatedJobs"
                )
        for reason in rule.get("onJobFailureReasons", []):
            if reason not in VALID_FAILURE_REASONS:
                problems.append(
                    f"invalid job failure reason '{reason}' in failure policy is not a recognized job failure reason"
                )
    for name, indices in indices_by_name.items():
        if len(indices) > 1:
            problems.append(f"rule names are not unique, rules with indices {indices} all have the same name '{name}'")
    return problems


def jobset_problems(jobset: Mapping[str, Any], features_on: frozenset[str] = frozenset()) -> list[str]:
    """ValidateCreate on a defaulted JobSet: every problem, in the webhook's order (its successPolicy check aside: the
    field is not modelled, JOBSET_SPEC_FIELDS)."""
    name, spec = jobset["metadata"]["name"], jobset["spec"]
    replicated_jobs = spec.get("replicatedJobs", [])
    problems = []
    if replicated_jobs and replicated_jobs[0].get("dependsOn"):
        problems.append("DependsOn can't be set for the first ReplicatedJob")
    subdomain = (spec.get("network") or {}).get("subdomain")
    if subdomain:
        problems += _dns1035_problems(subdomain, ".spec.network.subdomain is too long, must be less than 63 characters")
    seen: set[str] = set()
    for index, replicated in enumerate(replicated_jobs):
        seen.add(replicated["name"])
        problems += replicated_job_problems(name, index, replicated)
        for dependency in replicated.get("dependsOn", []):
            if dependency["name"] not in seen:
                problems.append(
                    f"replicatedJob: {replicated['name']} cannot depend on replicatedJob: {dependency['name']}"
                )
    if spec.get("failurePolicy") is not None:
        problems += failure_policy_problems(spec, features_on)
    return problems


def admit_jobset(jobset: Mapping[str, Any], features_on: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The JobSet as stored once admitted (defaulted); raises JobSetAdmissionError with every problem otherwise."""
    stored = defaulted(jobset)
    problems = jobset_problems(stored, features_on)
    if problems:
        raise JobSetAdmissionError(stored["metadata"]["name"], problems)
    require_modelled(stored["spec"], JOBSET_SPEC_FIELDS, "spec", JOBSET_MODEL)  # admitted: act only on what it reads
    return stored
