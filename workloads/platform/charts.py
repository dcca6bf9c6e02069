"""The Helm charts the platform installs, as pure data: repository, chart, pinned version, namespace, values.

`Platform` turns each into a helm.v3.Release. A Release is a real Helm release in the cluster (visible to `helm
list`, upgraded in place, with the charts' hooks run as Helm runs them: kube-prometheus-stack's admission-webhook
certificates come from hook Jobs), and Pulumi waits until its workloads are ready, so whatever depends on a
Release (a ServiceMonitor needing the CRDs) is created after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stack.config import StackConfig
from stack.names import PLATFORM_NAMESPACE
from stack.versions import (
    DCGM_EXPORTER_CHART_VERSION,
    EFA_DEVICE_PLUGIN_CHART_VERSION,
    KUBE_PROMETHEUS_STACK_CHART_VERSION,
    NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
)
from workloads.platform.device_plugins import efa_device_plugin_values, nvidia_device_plugin_values
from workloads.platform.monitoring import (
    MONITORING_RELEASE,
    dcgm_exporter_values,
    kube_prometheus_stack_values,
    stack_prometheus_volume,
)
from workloads.platform.placement import platform_node_selector

NVIDIA_REPO = "https://nvidia.github.io/k8s-device-plugin"
EKS_CHARTS_REPO = "https://aws.github.io/eks-charts"
PROMETHEUS_COMMUNITY_REPO = "https://prometheus-community.github.io/helm-charts"
DCGM_EXPORTER_REPO = "https://nvidia.github.io/dcgm-exporter/helm-charts"
# Node agents go where Kubernetes expects node-critical pods (their charts ask for system-node-critical priority).
NODE_AGENT_NAMESPACE = "kube-system"


@dataclass(frozen=True)
class ChartRelease:
    key: str  # the Pulumi resource name's suffix and how the Platform refers to the release
    release_name: str
    repository: str
    chart: str
    version: str
    namespace: str
    values: dict[str, Any]
    timeout_s: int = 600


def device_plugin_charts(config: StackConfig) -> list[ChartRelease]:
    charts = [
        ChartRelease(
            "nvidia-device-plugin",
            "nvidia-device-plugin",
            NVIDIA_REPO,
            "nvidia-device-plugin",
            NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
            NODE_AGENT_NAMESPACE,
            nvidia_device_plugin_values(),
        ),
    ]
    if config.gpu_nodes.efa_enabled:
        charts.append(
            ChartRelease(
                "efa-device-plugin",
                "aws-efa-k8s-device-plugin",
                EKS_CHARTS_REPO,
                "aws-efa-k8s-device-plugin",
                EFA_DEVICE_PLUGIN_CHART_VERSION,
                NODE_AGENT_NAMESPACE,
                efa_device_plugin_values(config.gpu_nodes),
            )
        )
    return charts


def monitoring_chart(config: StackConfig) -> ChartRelease:
    # Fifteen minutes: the first install pulls a dozen images and waits for Prometheus' volume.
    return ChartRelease(
        "kube-prometheus-stack",
        MONITORING_RELEASE,
        PROMETHEUS_COMMUNITY_REPO,
        "kube-prometheus-stack",
        KUBE_PROMETHEUS_STACK_CHART_VERSION,
        PLATFORM_NAMESPACE,
        kube_prometheus_stack_values(
            config.monitoring, platform_node_selector(config), claim_from_stack=stack_prometheus_volume(config)
        ),
        timeout_s=900,
    )


def dcgm_exporter_chart(config: StackConfig) -> ChartRelease:
    return ChartRelease(
        "dcgm-exporter",
        "dcgm-exporter",
        DCGM_EXPORTER_REPO,
        "dcgm-exporter",
        DCGM_EXPORTER_CHART_VERSION,
        NODE_AGENT_NAMESPACE,
        dcgm_exporter_values(config),
    )
