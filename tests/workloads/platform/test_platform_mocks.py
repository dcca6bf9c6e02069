"""The Platform component under the Pulumi SDK's mocks: pinned charts, the cluster's provider on every Kubernetes
resource, the ordering a first `pulumi up` and a `pulumi destroy` need, and no load balancer unless asked for."""

from __future__ import annotations

import json
import re

import pytest

from stack.files import raw_stack_config, stack_names
from stack.versions import (
    DCGM_EXPORTER_CHART_VERSION,
    EFA_DEVICE_PLUGIN_CHART_VERSION,
    KUBE_PROMETHEUS_STACK_CHART_VERSION,
    NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
)
from tests.workloads.platform.platform_program import (
    GPU_NODES_NAME,
    PROVIDER_NAME,
    PlatformRun,
    Registered,
    run_platform,
)
from workloads.platform.dashboards import DASHBOARD_LABEL

pytestmark = pytest.mark.program  # every test here runs the Platform component under the mocks

RELEASE = "kubernetes:helm.sh/v3:Release"
SECRET_SIG = "4dabf18193072939515e22adb298388d"  # the Pulumi wire format's marker of a secret value
PINNED = {
    "nvidia-device-plugin": NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
    "aws-efa-k8s-device-plugin": EFA_DEVICE_PLUGIN_CHART_VERSION,
    "kube-prometheus-stack": KUBE_PROMETHEUS_STACK_CHART_VERSION,
    "dcgm-exporter": DCGM_EXPORTER_CHART_VERSION,
}
ALL_OPTIONS = {"fsdp-eks:monitoring": {"nodeTools": True, "cloudwatchObservability": True}}


def platform(stack: str, overrides: dict | None = None) -> PlatformRun:
    """The stack's platform with `overrides` merged into the stack file's sections (the file's other keys kept)."""
    raw = raw_stack_config(stack)
    merged = {key: {**(raw.get(key) or {}), **value} for key, value in (overrides or {}).items()}
    return run_platform(stack, json.dumps(merged, sort_keys=True))


def depends_on(run: PlatformRun, resource: Registered) -> set[str]:
    return {urn.rsplit("::", 1)[-1] for urn in resource.dependencies}


def release(run: PlatformRun, chart: str) -> Registered:
    return next(r for r in run.of_type(RELEASE) if r.inputs["chart"] == chart)


@pytest.mark.parametrize("stack", stack_names())
def test_every_chart_is_pinned_to_its_version_in_the_versions_module(stack: str) -> None:
    releases = platform(stack, ALL_OPTIONS).of_type(RELEASE)
    assert releases
    for r in releases:
        assert r.inputs["version"] == PINNED[r.inputs["chart"]]
        assert re.fullmatch(r"v?\d+\.\d+\.\d+", r.inputs["version"])  # an exact release, never a range
        assert r.inputs["repositoryOpts"]["repo"].startswith("https://")


def test_the_training_operator_is_a_pinned_1_9_release() -> None:
    (operator,) = platform("dev").of_type("kubernetes:kustomize/v2:Directory")
    assert re.search(r"/manifests/overlays/standalone\?ref=v1\.9\.\d+$", operator.inputs["directory"])


@pytest.mark.parametrize("stack", stack_names())
def test_every_kubernetes_resource_uses_the_clusters_provider(stack: str) -> None:
    run = platform(stack, ALL_OPTIONS)
    kubernetes = [r for r in run.resources if r.type.startswith("kubernetes:")]
    assert len(kubernetes) >= 8
    for r in kubernetes:
        provider_urn = r.provider.rsplit("::", 1)[0]  # a provider reference is "URN::ID"
        assert provider_urn.endswith(f"pulumi:providers:kubernetes::{PROVIDER_NAME}"), f"{r.name} is off the cluster"


def test_every_resource_is_a_child_of_the_platform() -> None:
    run = platform("p5-16", ALL_OPTIONS)
    component = run.named("platform")
    outside = {"pulumi:providers:kubernetes", "random:index/randomId:RandomId", "fsdp-eks:workloads:Platform"}
    for r in run.resources:
        if r.type not in outside and r.type != "aws:iam/rolePolicyAttachment:RolePolicyAttachment":
            assert r.parent == component.urn, f"{r.name} is not parented to the platform"


def test_servicemonitors_and_podmonitors_come_after_the_monitoring_crds() -> None:
    run = platform("p5-16", ALL_OPTIONS)
    stack_release = release(run, "kube-prometheus-stack").name
    assert stack_release in depends_on(run, release(run, "dcgm-exporter"))  # its chart holds a ServiceMonitor
    (pod_monitor,) = run.of_type("kubernetes:monitoring.coreos.com/v1:PodMonitor")
    assert stack_release in depends_on(run, pod_monitor)


def test_grafanas_dashboards_and_prometheus_storage_exist_before_the_monitoring_chart() -> None:
    run = platform("p5-16", ALL_OPTIONS)
    needs = depends_on(run, release(run, "kube-prometheus-stack"))
    dashboards = [
        r for r in run.of_type("kubernetes:core/v1:ConfigMap") if DASHBOARD_LABEL in r.inputs["metadata"]["labels"]
    ]
    assert dashboards and {d.name for d in dashboards} <= needs
    assert run.one_named("storageclass", "fsdp-eks-gp3").name in needs


def test_namespaced_objects_wait_for_the_platform_namespace() -> None:
    run = platform("p5-16", ALL_OPTIONS)
    namespace = run.of_type("kubernetes:core/v1:Namespace")[0].name
    for r in run.resources:
        inputs_namespace = (r.inputs.get("metadata") or {}).get("namespace") or r.inputs.get("namespace")
        if inputs_namespace == "fsdp-system":
            assert namespace in depends_on(run, r), f"{r.name} may be created before its namespace"


def test_node_agents_wait_for_the_gpu_node_group() -> None:
    run = platform("p5-16", ALL_OPTIONS)
    agents = [
        *(release(run, c) for c in ("nvidia-device-plugin", "aws-efa-k8s-device-plugin", "dcgm-exporter")),
        *run.of_type("kubernetes:apps/v1:DaemonSet"),
        *run.of_type("aws:eks/addon:Addon"),
    ]
    assert len(agents) == 5
    for agent in agents:
        assert GPU_NODES_NAME in depends_on(run, agent), f"{agent.name} does not wait for the GPU nodes"


def test_etcds_network_policy_is_a_kubernetes_network_policy_in_the_platform_namespace() -> None:
    (policy,) = platform("p5-16").of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
    assert policy.inputs["metadata"]["namespace"] == "fsdp-system"
    assert policy.inputs["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"]["fsdp-eks/stack"] == "p5-16"


def test_named_objects_are_deleted_before_they_are_replaced() -> None:
    run = platform("dev")
    for r in run.resources:
        if r.type.startswith("kubernetes:") and r.type not in (RELEASE, "kubernetes:kustomize/v2:Directory"):
            assert r.delete_before_replace, f"{r.name} would collide with itself on replacement"


@pytest.mark.parametrize("stack", stack_names())
def test_no_load_balancer_unless_the_stack_asks_for_one(stack: str) -> None:
    run = platform(stack, ALL_OPTIONS)
    for service in run.of_type("kubernetes:core/v1:Service"):
        assert service.inputs["spec"].get("type", "ClusterIP") != "LoadBalancer"
    assert release(run, "kube-prometheus-stack").inputs["values"]["grafana"]["service"]["type"] == "ClusterIP"


def test_grafana_gets_a_load_balancer_when_configured() -> None:
    run = platform("dev", {"fsdp-eks:monitoring": {"grafanaLoadBalancer": True}})
    assert release(run, "kube-prometheus-stack").inputs["values"]["grafana"]["service"]["type"] == "LoadBalancer"


def test_pulumi_makes_no_grafana_password_the_chart_makes_it_in_the_cluster() -> None:
    """Neither a password nor a Secret of ours: with neither adminPassword nor admin.existingSecret in its values, the
    Grafana chart renders its own Secret with a random password (workloads/platform/monitoring.py)."""
    run = platform("dev", ALL_OPTIONS)
    assert not run.of_type("random:index/randomPassword:RandomPassword")
    assert not run.of_type("kubernetes:core/v1:Secret")
    grafana = release(run, "kube-prometheus-stack").inputs["values"]["grafana"]
    assert grafana["enabled"] is True
    assert "adminPassword" not in grafana and "existingSecret" not in (grafana.get("admin") or {})
    assert not [r.name for r in run.resources if SECRET_SIG in json.dumps(r.inputs)], "a value marked secret"


def test_the_password_command_reads_the_secret_the_grafana_chart_makes() -> None:
    """The chart names its admin Secret by its fullname, which the values override (grafana.fullname)."""
    run = platform("dev")
    grafana = release(run, "kube-prometheus-stack").inputs["values"]["grafana"]
    command = run.outputs["nextCommands"]["grafanaPassword"]
    assert f"-n fsdp-system get secret {grafana['fullnameOverride']} " in command
    assert release(run, "kube-prometheus-stack").inputs["namespace"] == "fsdp-system"  # the Secret's namespace
    assert "{.data.admin-password}" in command and command.endswith("| base64 -d")


def test_the_efa_device_plugin_is_installed_only_where_the_nodes_have_efa() -> None:
    charts = {r.inputs["chart"] for r in platform("dev").of_type(RELEASE)}  # g6e.xlarge: no EFA
    assert "aws-efa-k8s-device-plugin" not in charts and "nvidia-device-plugin" in charts
    efa = release(platform("p5-16", ALL_OPTIONS), "aws-efa-k8s-device-plugin")
    assert efa.inputs["values"]["supportedInstanceLabels"]["values"] == ["p5.48xlarge"]


def test_optional_parts_follow_the_config() -> None:
    default, everything = platform("dev"), platform("dev", ALL_OPTIONS)
    assert not default.of_type("aws:eks/addon:Addon") and not default.of_type("kubernetes:apps/v1:DaemonSet")
    (addon,) = everything.of_type("aws:eks/addon:Addon")
    assert addon.inputs["addonName"] == "amazon-cloudwatch-observability"
    assert addon.inputs["clusterName"] == "fsdp-eks-dev"
    assert len(everything.of_type("kubernetes:apps/v1:DaemonSet")) == 1


def test_monitoring_off_installs_no_monitoring() -> None:
    run = platform("dev", {"fsdp-eks:monitoring": {"enabled": False}})
    charts = {r.inputs["chart"] for r in run.of_type(RELEASE)}
    assert charts == {"nvidia-device-plugin"}
    assert not run.of_type("kubernetes:monitoring.coreos.com/v1:PodMonitor")
    assert "grafana" not in run.outputs["nextCommands"]


def test_outputs_name_the_etcd_endpoint_and_the_next_commands() -> None:
    run = platform("dev")
    assert run.outputs["etcdEndpoint"] == "etcd.fsdp-system.svc.cluster.local:2379"
    assert {"grafana", "grafanaPassword", "trainingPods", "leaderLog"} <= set(run.outputs["nextCommands"])
