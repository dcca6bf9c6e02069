"""Helm values of the device plugins that advertise nvidia.com/gpu and vpc.amazonaws.com/efa to the kubelet.

Both run on the GPU node group only: they select its label and tolerate its taint. The charts' own default
affinities key on labels this cluster's nodes do not carry (Node Feature Discovery's PCI labels for NVIDIA) or on
a long instance-type list (EFA), so the values replace those lists with the node group's label and instance type.
"""

from __future__ import annotations

from typing import Any

from stack.config import GpuNodesConfig
from stack.names import GPU_NODE_GROUP, INSTANCE_TYPE_LABEL, NODE_GROUP_LABEL
from workloads.platform.monitoring import GPU_NODES, GPU_TOLERATION

# infra/gpu_nodes.py labels each GPU node with whether its launch template attached EFA interfaces.
EFA_NODE_LABEL = "fsdp-eks/efa"


def _only_on_gpu_nodes() -> dict[str, Any]:
    # Helm merges maps but replaces lists, so this list takes the place of the chart's nodeSelectorTerms.
    term = {"matchExpressions": [{"key": NODE_GROUP_LABEL, "operator": "In", "values": [GPU_NODE_GROUP]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def nvidia_device_plugin_values() -> dict[str, Any]:
    return {
        "nodeSelector": GPU_NODES,
        "affinity": _only_on_gpu_nodes(),
        "tolerations": [GPU_TOLERATION, {"key": "CriticalAddonsOnly", "operator": "Exists"}],
        # GPU feature discovery (and the Node Feature Discovery it pulls in) only adds labels nothing here reads.
        "gfd": {"enabled": False},
    }


def efa_device_plugin_values(gpu: GpuNodesConfig) -> dict[str, Any]:
    return {
        "nodeSelector": {**GPU_NODES, EFA_NODE_LABEL: "true"},
        "tolerations": [GPU_TOLERATION],
        # The chart's affinity lists EFA-capable instance types; the node group has exactly one.
        "supportedInstanceLabels": {"keys": [INSTANCE_TYPE_LABEL], "values": [gpu.instance_type]},
    }
