"""What the job's pods need to keep a bad node out of the job (trainer/launch/node_taint.py): their node's name from
the downward API, and a ClusterRole with get and patch on nodes bound to their service account, valid for Kubernetes'
strict schemas and registered before the job."""

from __future__ import annotations

import kubernetes_validate
import pytest

from stack.config import KUBERNETES_VERSIONS
from trainer.base.pod.bad_node import BAD_NODE_TAINT_EFFECT, BAD_NODE_TAINT_KEY, NODE_NAME_FIELD, NODE_NAME_VARIABLE
from workloads.job.api import job_api_for
from workloads.job.node_access import (
    NODE_NAME_EXTRA,
    POLICY_MIN_KUBERNETES,
    node_access_objects,
    node_admission_policy,
    node_admission_policy_binding,
    node_cluster_role,
    node_cluster_role_binding,
)

from .job_stacks import STACKS, spec_of
from .test_job_component import SERVICE_ACCOUNT, built, one

KUBERNETES_VERSION = f"{KUBERNETES_VERSIONS[-1]}.0"
BINDING = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
POLICY_BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"


@pytest.mark.parametrize("stack", STACKS)
def test_every_api_gives_each_container_its_node_name_from_the_downward_api(stack: str) -> None:
    spec = spec_of(stack)
    pod = job_api_for(spec.api).worker_pod(spec)
    (container,) = pod["spec"]["containers"]
    (entry,) = [e for e in container["env"] if e["name"] == NODE_NAME_VARIABLE]
    assert entry == {"name": NODE_NAME_VARIABLE, "valueFrom": {"fieldRef": {"fieldPath": NODE_NAME_FIELD}}}


@pytest.mark.parametrize("stack", STACKS)
def test_node_access_passes_the_strict_kubernetes_schema_and_is_rendered(stack: str) -> None:
    spec = spec_of(stack)
    for manifest in node_access_objects(spec):
        kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)
    rendered = [o for o in job_api_for(spec.api).objects(spec) if o["apiVersion"].split("/")[0].endswith(".k8s.io")]
    assert node_access_objects(spec) == rendered


def test_the_role_allows_reading_and_patching_nodes_and_nothing_else() -> None:
    (rule,) = node_cluster_role(spec_of("dev"))["rules"]
    assert rule == {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}


def test_the_role_is_bound_to_the_jobs_service_account_alone() -> None:
    spec = spec_of("dev")
    binding = node_cluster_role_binding(spec)
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": spec.service_account, "namespace": spec.namespace}
    ]
    assert binding["roleRef"]["name"] == node_cluster_role(spec)["metadata"]["name"]


@pytest.mark.program
def test_the_job_starts_after_its_node_access_is_bound() -> None:
    resources = built()
    binding = one(resources, BINDING)
    assert binding["inputs"]["subjects"][0]["name"] == one(resources, SERVICE_ACCOUNT)["inputs"]["metadata"]["name"]
    assert binding["urn"] in one(resources, "kubernetes:kubeflow.org/v1:PyTorchJob")["dependencies"]


# No CEL evaluator is installed in .venv: these tests check the policy's structure and the rules' text; the CEL itself
# is not evaluated here.
def test_the_admission_policy_applies_to_the_jobs_service_account_alone_on_every_node_request() -> None:
    spec = spec_of("dev")
    policy = node_admission_policy(spec)["spec"]
    (rule,) = policy["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == [""] and rule["operations"] == ["*"] and set(rule["resources"]) == {"nodes", "nodes/*"}
    (condition,) = policy["matchConditions"]
    username = f"system:serviceaccount:{spec.namespace}:{spec.service_account}"
    assert condition["expression"] == f"request.userInfo.username == '{username}'"
    assert policy["failurePolicy"] == "Fail"
    binding = node_admission_policy_binding(spec)["spec"]
    assert binding == {"policyName": node_admission_policy(spec)["metadata"]["name"], "validationActions": ["Deny"]}


def test_the_admission_policy_admits_only_the_bad_node_taint_on_the_callers_own_node() -> None:
    rules = " && ".join(v["expression"] for v in node_admission_policy(spec_of("dev"))["spec"]["validations"])
    assert "request.operation == 'UPDATE'" in rules
    assert f"request.name in request.userInfo.extra['{NODE_NAME_EXTRA}']" in rules
    for unchanged in ("metadata.?labels", "metadata.?annotations", "spec.?unschedulable", "spec.?providerID"):
        assert f"object.{unchanged} == oldObject.{unchanged}" in rules
    assert f"t.key != '{BAD_NODE_TAINT_KEY}'" in rules and f"t.effect == '{BAD_NODE_TAINT_EFFECT}'" in rules


@pytest.mark.program
def test_the_role_is_bound_only_after_the_admission_policy_that_narrows_it() -> None:
    resources = built()
    assert one(resources, POLICY_BINDING)["urn"] in one(resources, BINDING)["dependencies"]
    assert (
        one(resources, POLICY_BINDING)["urn"] in one(resources, "kubernetes:kubeflow.org/v1:PyTorchJob")["dependencies"]
    )


def test_every_kubernetes_version_of_the_stack_enforces_the_policy_and_names_the_callers_node() -> None:
    assert all(tuple(int(n) for n in version.split(".")) >= POLICY_MIN_KUBERNETES for version in KUBERNETES_VERSIONS)
