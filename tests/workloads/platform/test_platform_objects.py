"""The Kubernetes objects the project builds itself, checked as plain dicts: Kubernetes' strict schemas for the
pinned version, a structural schema for the prometheus-operator custom resources, and what etcd must be."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from stack.config import KUBERNETES_VERSIONS, StackConfig
from stack.files import load_stack_config, stack_names
from stack.names import (
    COMPONENT_LABEL,
    ETCD_CLIENT_PORT,
    ETCD_SERVICE_NAME,
    JOB_ROLE_LABEL,
    LEADER_ROLE,
    PLATFORM_NAMESPACE,
    TRAINER_COMPONENT,
    TRAINER_METRICS_PORT_NAME,
    TRAINING_NAMESPACE,
)
from stack.versions import ETCD_IMAGE, NODE_TOOLS_IMAGE
from workloads.job.pytorchjob import pytorchjob_manifest
from workloads.job.spec import job_spec
from workloads.platform.etcd import etcd_deployment, etcd_network_policy, etcd_service
from workloads.platform.monitoring import trainer_pod_monitor
from workloads.platform.objects import next_commands, platform_objects
from workloads.render import all_objects

KUBERNETES_VERSION = f"{KUBERNETES_VERSIONS[-1]}.0"  # kubernetes-validate names schema sets by full version
# Kinds kubernetes-validate has no schema for: custom resources, checked against their own schemas below (the
# PyTorchJob by the job's tests, through the kubeflow-training SDK models).
CUSTOM_KINDS = {("monitoring.coreos.com/v1", "PodMonitor"), ("kubeflow.org/v1", "PyTorchJob")}


def with_monitoring(config: StackConfig, **changes: Any) -> StackConfig:
    return dataclasses.replace(config, monitoring=dataclasses.replace(config.monitoring, **changes))


def every_variant(stack: str) -> list[StackConfig]:
    """The stack as written, and with every optional platform object switched on."""
    config = load_stack_config(stack)
    return [config, with_monitoring(config, node_tools=True, grafana_load_balancer=True, cloudwatch_observability=True)]


@pytest.mark.parametrize("stack", stack_names())
def test_every_built_object_passes_the_strict_kubernetes_schema(stack: str) -> None:
    checked = 0
    for config in every_variant(stack):
        for obj in all_objects(config):
            if (obj["apiVersion"], obj["kind"]) in CUSTOM_KINDS:
                continue
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
            checked += 1
    assert checked >= 6


def test_the_pinned_kubernetes_version_has_a_schema_in_kubernetes_validate() -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}
    kubernetes_validate.validate(namespace, KUBERNETES_VERSION, strict=True)  # raises SchemaNotFoundError if not


# The PodMonitor fields the project writes, as prometheus-operator's CRD (monitoring.coreos.com/v1) defines them,
# written by hand from its API reference: kubernetes-validate has no schema for custom resources and the CRD ships
# inside the chart, which tests cannot download. Unknown fields are rejected, as a structural CRD would prune them.
_LABEL_SELECTOR = {
    "type": "object",
    "properties": {"matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}},
    "additionalProperties": False,
}
_RELABELING = {
    "type": "object",
    "properties": {
        "sourceLabels": {"type": "array", "items": {"type": "string", "pattern": "^[a-zA-Z_][a-zA-Z0-9_]*$"}},
        "targetLabel": {"type": "string", "minLength": 1},
        "action": {"enum": ["replace", "keep", "drop", "labelmap", "labeldrop", "labelkeep", "hashmod"]},
        "regex": {"type": "string"},
        "replacement": {"type": "string"},
        "separator": {"type": "string"},
    },
    "additionalProperties": False,
}
POD_MONITOR_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PodMonitor"},
        "metadata": {"type": "object", "required": ["name", "namespace"]},
        "spec": {
            "type": "object",
            "required": ["selector", "podMetricsEndpoints"],
            "properties": {
                "selector": _LABEL_SELECTOR,
                "namespaceSelector": {
                    "type": "object",
                    "properties": {
                        "matchNames": {"type": "array", "items": {"type": "string"}},
                        "any": {"type": "boolean"},
                    },
                    "additionalProperties": False,
                },
                "podMetricsEndpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "port": {"type": "string", "minLength": 1},
                            "path": {"type": "string", "pattern": "^/"},
                            # Prometheus' duration syntax, as the CRD's pattern requires.
                            "interval": {
                                "type": "string",
                                "pattern": "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?"
                                "(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
                            },
                            "relabelings": {"type": "array", "items": _RELABELING},
                        },
                        "additionalProperties": False,
                    },
                },
            },
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}


def test_the_trainer_pod_monitor_has_the_structure_the_crd_requires() -> None:
    jsonschema.validate(trainer_pod_monitor(), POD_MONITOR_SCHEMA)


def test_the_trainer_pod_monitor_selects_the_trainer_pods_on_their_metrics_port() -> None:
    spec = trainer_pod_monitor()["spec"]
    assert spec["selector"]["matchLabels"] == {COMPONENT_LABEL: TRAINER_COMPONENT, JOB_ROLE_LABEL: LEADER_ROLE}
    assert spec["namespaceSelector"]["matchNames"] == [TRAINING_NAMESPACE]
    assert [e["port"] for e in spec["podMetricsEndpoints"]] == [TRAINER_METRICS_PORT_NAME]


def test_etcd_runs_a_pinned_3_5_image_with_the_v2_api() -> None:
    container = etcd_deployment()["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == ETCD_IMAGE and ":v3.5." in ETCD_IMAGE
    assert "--enable-v2=true" in container["command"]


# Images the project pins by tag only, because no digest for them could be checked from a public source; every
# other image in an object the project builds must name its digest.
TAG_ONLY_IMAGES = {ETCD_IMAGE}


def container_images(obj: dict[str, Any]) -> list[str]:
    pod = obj.get("spec", {}).get("template", {}).get("spec", {})
    return [c["image"] for c in [*pod.get("initContainers", []), *pod.get("containers", [])]]


@pytest.mark.parametrize("stack", stack_names())
def test_every_image_the_platform_builds_is_pinned_by_digest(stack: str) -> None:
    images = {
        image for config in every_variant(stack) for obj in platform_objects(config) for image in container_images(obj)
    }
    assert NODE_TOOLS_IMAGE in images or not load_stack_config(stack).monitoring.node_tools
    for image in images - TAG_ONLY_IMAGES:
        assert re.fullmatch(r"[^@\s]+@sha256:[0-9a-f]{64}", image), f"{image} is not pinned by digest"


def test_etcd_has_probes_and_resource_requests() -> None:
    container = etcd_deployment()["spec"]["template"]["spec"]["containers"][0]
    assert {"livenessProbe", "readinessProbe"} <= set(container)
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])


def test_etcd_runs_on_the_system_nodes_only() -> None:
    pod = etcd_deployment()["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"fsdp-eks/node-group": "system"}
    assert "tolerations" not in pod


def test_etcd_is_reachable_inside_the_cluster_only_at_the_shared_name_and_port() -> None:
    service = etcd_service()
    assert service["metadata"] == service["metadata"] | {"name": ETCD_SERVICE_NAME, "namespace": PLATFORM_NAMESPACE}
    assert service["spec"]["type"] == "ClusterIP"
    assert ETCD_CLIENT_PORT in [p["port"] for p in service["spec"]["ports"]]


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) == {"matchLabels"}, "only matchLabels selectors are modelled here"
    return selector["matchLabels"].items() <= labels.items()


def admits(policy: dict[str, Any], namespace: str, pod_labels: dict[str, str], port: int) -> bool:
    """Whether a NetworkPolicy's ingress rules let a pod with these labels, in this namespace, reach `port`. The
    namespace's labels are the one Kubernetes itself sets on every namespace (kubernetes.io/metadata.name)."""
    namespace_labels = {"kubernetes.io/metadata.name": namespace}
    for rule in policy["spec"]["ingress"]:
        ports = {(p["protocol"], p["port"]) for p in rule["ports"]}
        peers = [
            selects(peer["namespaceSelector"], namespace_labels) and selects(peer["podSelector"], pod_labels)
            for peer in rule["from"]
        ]
        if ("TCP", port) in ports and any(peers):
            return True
    return False


def trainer_pod_labels(stack: str) -> dict[str, str]:
    manifest = pytorchjob_manifest(job_spec(load_stack_config(stack), "registry/trainer:tag"))
    return manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]["labels"]


def test_etcds_network_policy_applies_to_the_etcd_pods_for_ingress() -> None:
    policy = etcd_network_policy("p5-16")
    assert policy["metadata"]["namespace"] == PLATFORM_NAMESPACE
    assert selects(policy["spec"]["podSelector"], etcd_deployment()["spec"]["template"]["metadata"]["labels"])
    assert policy["spec"]["policyTypes"] == ["Ingress"]


@pytest.mark.parametrize("stack", stack_names())
def test_the_stacks_training_pods_reach_etcd_on_the_client_port(stack: str) -> None:
    policy = next(o for o in platform_objects(load_stack_config(stack)) if o["kind"] == "NetworkPolicy")
    assert admits(policy, TRAINING_NAMESPACE, trainer_pod_labels(stack), ETCD_CLIENT_PORT)


def test_no_other_pod_reaches_etcd() -> None:
    policy = etcd_network_policy("p5-16")
    trainers = trainer_pod_labels("p5-16")
    assert not admits(policy, TRAINING_NAMESPACE, trainer_pod_labels("p5-8"), ETCD_CLIENT_PORT)  # another stack
    assert not admits(policy, "default", trainers, ETCD_CLIENT_PORT)  # the same labels in another namespace
    assert not admits(policy, TRAINING_NAMESPACE, {"app": "debug"}, ETCD_CLIENT_PORT)  # another pod beside them
    assert not admits(policy, TRAINING_NAMESPACE, trainers, 2380)  # another port


def test_grafana_objects_follow_the_grafana_switch() -> None:
    config = load_stack_config("dev")
    kinds_on = {o["kind"] for o in platform_objects(config)}
    kinds_off = {o["kind"] for o in platform_objects(with_monitoring(config, grafana=False))}
    assert "ConfigMap" in kinds_on and "ConfigMap" not in kinds_off


def test_no_monitoring_objects_when_monitoring_is_off() -> None:
    config = with_monitoring(load_stack_config("dev"), enabled=False)
    assert {o["kind"] for o in platform_objects(config)} == {"Namespace", "Deployment", "Service", "NetworkPolicy"}


@pytest.mark.parametrize("stack", stack_names())
def test_the_project_builds_no_secret_grafanas_is_the_charts(stack: str) -> None:
    for config in every_variant(stack):
        assert [o["metadata"]["name"] for o in platform_objects(config) if o["kind"] == "Secret"] == []


def test_next_commands_cover_grafana_its_password_the_pods_and_the_leaders_log() -> None:
    commands = next_commands(load_stack_config("p5-16"))
    assert {"grafana", "grafanaPassword", "trainingPods", "leaderLog"} <= set(commands)
    assert "port-forward svc/grafana" in commands["grafana"]
    assert "logs -f" in commands["leaderLog"] and "job-role=master" in commands["leaderLog"]


def test_the_wait_command_names_the_pytorchjob_the_stack_renders_and_its_success_condition() -> None:
    config = load_stack_config("p5-2")
    (job,) = [o for o in all_objects(config) if o["kind"] == "PyTorchJob"]
    command = next_commands(config)["waitForJob"]
    assert f" wait --for=condition=Succeeded pytorchjob/{job['metadata']['name']} " in command
