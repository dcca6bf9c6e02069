"""What the job's pods need to keep a bad node out of the job (trainer/launch/node_taint.py): their node's name from
the downward API, and a ClusterRole with get and patch on nodes bound to their service account, valid for Kubernetes'
strict schemas and registered before the job."""

from __future__ import annotations

import kubernetes_validate
import pytest

from stack.config import KUBERNETES_VERSIONS
from trainer.launch.node_taint import NODE_NAME_FIELD, NODE_NAME_VARIABLE
from workloads.job.api import job_api_for
from workloads.job.node_access import node_access_objects, node_cluster_role, node_cluster_role_binding

from .job_stacks import STACKS, spec_of
from .test_job_component import SERVICE_ACCOUNT, built, one

KUBERNETES_VERSION = f"{KUBERNETES_VERSIONS[-1]}.0"
BINDING = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"


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
    assert node_access_objects(spec) == [o for o in job_api_for(spec.api).objects(spec) if "rbac" in o["apiVersion"]]


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


def test_the_job_starts_after_its_node_access_is_bound() -> None:
    resources = built()
    binding = one(resources, BINDING)
    assert binding["inputs"]["subjects"][0]["name"] == one(resources, SERVICE_ACCOUNT)["inputs"]["metadata"]["name"]
    assert binding["urn"] in one(resources, "kubernetes:kubeflow.org/v1:PyTorchJob")["dependencies"]
