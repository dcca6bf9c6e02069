"""What a GPU node gives the pods scheduled on it: the label they select, the taint they tolerate, the huge pages
they request. The stack's GPU node group (infra/gpu_nodes.py) sets each of these; an existing cluster's GPU nodes
must provide them (docs/aws.md, "An existing cluster"). Pure, so the job's builders import it without Pulumi.
"""

from __future__ import annotations

from stack.names import (
    GPU_NODE_GROUP,
    GPU_TAINT_EFFECT,
    GPU_TAINT_KEY,
    GPU_TAINT_VALUE,
    NODE_GROUP_LABEL,
    SYSTEM_NODE_GROUP,
)

GPU_NODE_GROUP_LABEL = (NODE_GROUP_LABEL, GPU_NODE_GROUP)
SYSTEM_NODE_GROUP_LABEL = (NODE_GROUP_LABEL, SYSTEM_NODE_GROUP)
EFA_LABEL = "fsdp-eks/efa"  # "true" on nodes whose EFA interfaces are attached
# The EKS API spells a taint's effect in its own enum (NO_SCHEDULE, NO_EXECUTE, PREFER_NO_SCHEDULE: the Taint data
# type of the EKS API reference, and pulumi-aws's eks.NodeGroupTaint), Kubernetes in camel case.
EKS_TAINT_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}
GPU_TAINT = {"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE, "effect": EKS_TAINT_EFFECTS[GPU_TAINT_EFFECT]}

# libfabric's EFA provider registers its bounce buffers in 2 MiB huge pages. EC2 instances with the EFA driver
# pre-allocate 5128 of them (EKS user guide, "Run machine learning training on Amazon EKS with Elastic Fabric
# Adapter"); the node group's user data reserves the same pool explicitly, before the kubelet starts. One training
# pod runs per node and requests the whole pool: a reserved page no pod requests is memory nothing can use.
HUGEPAGE_SIZE_MIB = 2
EFA_HUGEPAGES_PER_NODE = 5128
EFA_HUGEPAGES_MIB = EFA_HUGEPAGES_PER_NODE * HUGEPAGE_SIZE_MIB
# The extended resources a GPU node advertises and the job requests: the NVIDIA and EFA device plugins' names, and
# the kubelet's name for the huge page pool of that size.
GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
HUGEPAGES_RESOURCE = f"hugepages-{HUGEPAGE_SIZE_MIB}Mi"


def efa_label_value(efa_enabled: bool) -> str:
    return str(efa_enabled).lower()


# The label by which the Cluster Autoscaler's AWS provider knows a node has GPUs before the device plugin has
# advertised them (kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/aws_cloud_provider.go GPULabel): a new
# GPU node without it looks ready with no GPUs, and a pod still waiting for one would make the autoscaler add another
# (processors/customresources/gpu_processor.go). Its value names the GPU, in the autoscaler's names where it has one
# (availableGPUTypes there).
AUTOSCALER_GPU_LABEL = "k8s.amazonaws.com/accelerator"
AUTOSCALER_GPU_TYPES = {
    "A100-SXM": "nvidia-tesla-a100",
    "H100-SXM": "nvidia-h100",
    "H200-SXM": "nvidia-h200",
    "L40S": "nvidia-l40s",
}
