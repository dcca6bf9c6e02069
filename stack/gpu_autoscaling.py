"""How the GPU node group scales: the managed node group's sizes and the Cluster Autoscaler's settings for it.
Written once for infra/gpu_nodes.py (the group), workloads/platform/autoscaler.py (the autoscaler) and
stack/run_cost.py (what idle nodes cost).

The group runs between min and max (kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws: the autoscaler only
changes an Auto Scaling group's desired capacity, within its bounds):
- min is 0 unless the stack keeps idle nodes (gpuNodes.keepIdleNodes), so after a job ends the autoscaler removes its
  emptied nodes: a node whose GPUs no pod requests is unneeded (its utilization is the requested share of its GPUs,
  simulator/utilization/info.go; a finished pod is no longer listed, utils/kubernetes/listers.go), and one unneeded for
  SCALE_DOWN_UNNEEDED_S is removed;
- max is count plus gpuNodes.spares: a pod that waits for a node (its own tainted by the launcher as bad, or lost)
  makes the autoscaler add one, and the tainted node, emptied, is removed like any other. The bad-node taint is a
  status taint to the autoscaler, so a template built from the tainted node does not carry it
  (utils/taints/taints.go SanitizeTaints, --status-taint), and the node is not counted unready for it.
"""

from __future__ import annotations

from stack.config import GpuNodesConfig
from stack.node_contract import EFA_HUGEPAGES_MIB, EFA_RESOURCE, HUGEPAGES_RESOURCE

# --scale-down-unneeded-time (cluster-autoscaler/config/flags/flags.go; 10 minutes is also its default): how long an
# emptied GPU node bills before it goes.
SCALE_DOWN_UNNEEDED_S = 10 * 60
# --max-node-provision-time: a GPU node that has not registered by then is given up and removed. The default (15
# minutes) is short for a p5 that boots, attaches 32 EFA interfaces and joins; 30 is an assumption, not measured.
MAX_NODE_PROVISION_S = 30 * 60


def min_size(config: GpuNodesConfig) -> int:
    return config.count if config.keeps_idle_nodes else 0


def max_size(config: GpuNodesConfig) -> int:
    """EKS requires max >= 1, also when the group is scaled to zero."""
    return max(config.count + config.spares, 1)


def autoscaled(config: GpuNodesConfig) -> bool:
    """Whether the Cluster Autoscaler manages the group: only where it has room to move."""
    return min_size(config) < max_size(config)


def releases_idle_nodes(config: GpuNodesConfig) -> bool:
    return min_size(config) == 0 and config.count > 0


# A node group's tags the autoscaler reads, through eks:DescribeNodegroup, for what a node it has not seen yet would
# have (cluster-autoscaler/cloudprovider/aws/aws_manager.go buildNodeFromTemplate: capacity from
# `k8s.io/cluster-autoscaler/node-template/resources/<name>` tags of the EKS node group; GPUs from the instance type,
# labels and taints from the node group's own). EFA devices and huge pages come from the device plugin and the user
# data, so a group at zero must state them, or a pod requesting them would never make it scale up.
NODE_TEMPLATE_RESOURCE_TAG = "k8s.io/cluster-autoscaler/node-template/resources/"


def node_template_tags(config: GpuNodesConfig) -> dict[str, str]:
    """The resources a GPU node of `config` gives beyond CPU, memory and GPUs, as node-template tags."""
    if not config.efa_enabled:
        return {}
    return {
        f"{NODE_TEMPLATE_RESOURCE_TAG}{EFA_RESOURCE}": str(config.instance.efa_interfaces),
        f"{NODE_TEMPLATE_RESOURCE_TAG}{HUGEPAGES_RESOURCE}": f"{EFA_HUGEPAGES_MIB}Mi",
    }
