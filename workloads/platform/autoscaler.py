"""The Cluster Autoscaler on the stack's own cluster, as the Helm release that installs it: it scales the GPU node
group between the bounds stack/gpu_autoscaling.py gives it, and nothing else.

kubernetes/autoscaler's chart (cluster-autoscaler/charts/cluster-autoscaler, version in stack/versions.py) on AWS:
`autoscalingGroups` becomes `--nodes=MIN:MAX:NAME` (templates/deployment.yaml), so the autoscaler manages the GPU
node group's Auto Scaling group alone (the system group keeps its own size), and `extraArgs` its flags
(config/flags/flags.go):
- `status-taint` with the launcher's bad-node taint: the autoscaler leaves the taint out of a node template built from
  the tainted node (utils/taints/taints.go SanitizeTaints), so the pod the taint keeps off that node makes it add a
  spare; and, unlike a startup taint, the node still counts as ready (FilterOutNodesWithStartupTaints);
- `scale-down-unneeded-time` and `max-node-provision-time` from stack/gpu_autoscaling.py.
Its role comes through EKS Pod Identity (infra/autoscaler_access.py); it runs on the system nodes.
"""

from __future__ import annotations

from typing import Any

import pulumi

from stack.config import StackConfig
from stack.gpu_autoscaling import MAX_NODE_PROVISION_S, SCALE_DOWN_UNNEEDED_S, max_size, min_size
from stack.versions import CLUSTER_AUTOSCALER_CHART_VERSION, CLUSTER_AUTOSCALER_IMAGE_TAGS
from trainer.base.pod.bad_node import BAD_NODE_TAINT_KEY
from workloads.platform.charts import ChartRelease
from workloads.platform.placement import platform_node_selector

AUTOSCALER_REPO = "https://kubernetes.github.io/autoscaler"
AUTOSCALER_RELEASE = "cluster-autoscaler"
AUTOSCALER_NAMESPACE = "kube-system"
AUTOSCALER_SERVICE_ACCOUNT = "cluster-autoscaler"


def minutes(seconds: int) -> str:
    """A Go duration in minutes, as the flags take it."""
    return f"{seconds // 60}m"


def autoscaler_args() -> dict[str, str]:
    return {
        "status-taint": BAD_NODE_TAINT_KEY,
        "scale-down-unneeded-time": minutes(SCALE_DOWN_UNNEEDED_S),
        "max-node-provision-time": minutes(MAX_NODE_PROVISION_S),
    }


def autoscaler_values(config: StackConfig, autoscaling_group: pulumi.Input[str]) -> dict[str, Any]:
    """The chart's values: AWS in the stack's region, the GPU group's Auto Scaling group with its bounds, the image of
    the cluster's Kubernetes minor, the service account the Pod Identity association names."""
    gpu = config.gpu_nodes
    return {
        "cloudProvider": "aws",
        "awsRegion": config.region,
        "autoscalingGroups": [{"name": autoscaling_group, "minSize": min_size(gpu), "maxSize": max_size(gpu)}],
        "image": {"tag": CLUSTER_AUTOSCALER_IMAGE_TAGS[config.cluster.kubernetes_version]},
        "fullnameOverride": AUTOSCALER_RELEASE,
        "rbac": {"serviceAccount": {"create": True, "name": AUTOSCALER_SERVICE_ACCOUNT}},
        "nodeSelector": platform_node_selector(config),
        "extraArgs": autoscaler_args(),
    }


def autoscaler_chart(config: StackConfig, autoscaling_group: pulumi.Input[str]) -> ChartRelease:
    return ChartRelease(
        "cluster-autoscaler",
        AUTOSCALER_RELEASE,
        AUTOSCALER_REPO,
        "cluster-autoscaler",
        CLUSTER_AUTOSCALER_CHART_VERSION,
        AUTOSCALER_NAMESPACE,
        autoscaler_values(config, autoscaling_group),
    )
