"""The GPU node group: a launch template with one EFA interface per network card, a cluster placement group,
capacity reservations and capacity blocks, all in one AZ, attached to the cluster as a managed node group.

Everything whose correctness matters (interface layout, security group rules, placement, metadata options) is
built here from pulumi_aws resources, so tests see it under mocks; pulumi_eks.ManagedNodeGroup only attaches it.
"""

from __future__ import annotations

import base64
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks

from infra.iam import PolicyRole
from infra.launch_templates import METADATA_OPTIONS, instance_name_tags, root_volume
from sizing.catalog import InstanceType
from stack.cluster_checks import GPU_NODE_GROUP_NAME, node_group_name_prefix
from stack.config import GpuNodesConfig
from stack.gpu_autoscaling import autoscaled, max_size, min_size, node_template_tags
from stack.node_contract import (
    AUTOSCALER_GPU_LABEL,
    AUTOSCALER_GPU_TYPES,
    EFA_HUGEPAGES_PER_NODE,
    EFA_LABEL,
    GPU_NODE_GROUP_LABEL,
    GPU_TAINT,
    efa_label_value,
)
from stack.price_list import PRICE_TAG_KEY, PriceQuote
from stack.versions import GPU_AMI_TYPE

# The config that empties the GPU node group; a job needs at least one node, so it is switched off too.
SCALE_TO_ZERO = "gpuNodes.count 0 and job.enabled false"
# gp3's maxima: pulling a multi-GB training image is I/O bound.
ROOT_VOLUME_IOPS = 16000
ROOT_VOLUME_THROUGHPUT_MIBPS = 1000


def efa_network_interfaces(
    instance: InstanceType, efa_security_group_id: pulumi.Input[str], cluster_security_group_id: pulumi.Input[str]
) -> list[dict[str, Any]]:
    """One EFA interface per network card, laid out as the EC2 guide ("Maximize network bandwidth on instances
    with multiple network cards") asks. Card 0, device 0 is the primary interface: an EFA with ENA, carrying the
    node's IP traffic, in the cluster security group so the control plane reaches the kubelet. Every other card
    gets one interface for GPU-to-GPU traffic only: `efa-only` (no IP address, so no VPC addresses spent) at
    device index 0 where the type supports it, otherwise a classic EFA at device index 1 (p4d/p4de)."""
    primary = {
        "network_card_index": 0,
        "device_index": 0,
        "interface_type": "efa",
        "delete_on_termination": "true",
        "security_groups": [cluster_security_group_id, efa_security_group_id],
    }
    others = [
        {
            "network_card_index": card,
            "device_index": 0 if instance.efa_only_supported else 1,
            "interface_type": "efa-only" if instance.efa_only_supported else "efa",
            "delete_on_termination": "true",
            "security_groups": [efa_security_group_id],
        }
        for card in range(1, instance.efa_interfaces)
    ]
    return [primary, *others]


def hugepages_user_data() -> str:
    """MIME multipart user data (the form EKS merges with its own nodeadm config on AL2023) that reserves
    the huge page pool before the kubelet starts."""
    return textwrap.dedent(
        f"""\
        MIME-Version: 1.0
        Content-Type: multipart/mixed; boundary="==FSDPEKS=="

        --==FSDPEKS==
        Content-Type: text/x-shellscript; charset="us-ascii"

        #!/bin/bash
        set -euo pipefail
        echo "vm.nr_hugepages = {EFA_HUGEPAGES_PER_NODE}" > /etc/sysctl.d/90-efa-hugepages.conf
        sysctl -w vm.nr_hugepages={EFA_HUGEPAGES_PER_NODE}

        --==FSDPEKS==--
        """
    )


def reserved_capacity_warning(config: GpuNodesConfig) -> str | None:
    """What `pulumi preview` says for nodes in a reservation: a rolling update has no spare capacity to surge into
    (a managed node group's update first launches new nodes, EKS user guide "Understand each phase of node
    updates"), and a capacity block's group must be at size 0 to be updated (EKS user guide, "Create a managed
    node group with Capacity Blocks for ML")."""
    if not config.reserved_capacity:
        return None
    kind = "capacity block" if config.capacity_type == "CAPACITY_BLOCK" else "capacity reservation"
    return (
        f"GPU nodes launch into {kind} {config.capacity_reservation_id}, which has no spare instances: a change "
        "that updates the node group (launch template, AMI, Kubernetes version) cannot roll. Scale to zero first "
        f"({SCALE_TO_ZERO}, then pulumi up), then make the change with the count and the job restored (docs/aws.md, "
        "'Updating nodes in a reservation')."
    )


# The resource pulumi-eks's ManagedNodeGroup creates, named like the component (nodejs/eks/nodes/nodegroup.ts
# createManagedNodeGroup; tests/harness/fake_eks.py models it).
EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


def node_repair_config(config: GpuNodesConfig) -> dict[str, Any]:
    """EKS node auto repair (EKS user guide, "Automatically repair nodes in EKS clusters"): a node whose
    AcceleratedHardwareReady, NetworkingReady, KernelReady, StorageReady or ContainerRuntimeReady condition (set by the
    node monitoring agent, infra/addons.py) or Ready stays false is rebooted or replaced, 10 minutes (GPU) or 30 (the
    rest) after it turned. The EKS API's NodeRepairConfig, as pulumi-aws's eks.NodeGroupNodeRepairConfigArgs spells
    it; EKS's own defaults otherwise (no repair while more than 20% of a group of more than five is unhealthy)."""
    return {"enabled": config.auto_repair}


def with_node_repair(
    args: pulumi.ResourceTransformArgs, node_group: str, repair: dict[str, Any]
) -> pulumi.ResourceTransformResult | None:
    """A stack transform giving the aws.eks.NodeGroup named `node_group` its nodeRepairConfig: pulumi-eks 4.4.0's
    ManagedNodeGroup has no such input (pulumi/pulumi-eks#1640, open, whose workaround this is), and the engine runs
    stack transforms on the resources a remote component's provider registers too (infra/iam_scope.py says where)."""
    if args.type_ != EKS_NODE_GROUP or args.name != node_group:
        return None
    return pulumi.ResourceTransformResult(props={**args.props, "nodeRepairConfig": repair}, opts=args.opts)


def autoscaling_group_of(resources: Sequence[aws.eks.outputs.NodeGroupResource] | None) -> str:
    """The name of the Auto Scaling group EKS made for a managed node group (NodegroupResources.autoScalingGroups:
    one per group); empty while the group has none yet."""
    groups = (resources[0].autoscaling_groups if resources else None) or []
    return (groups[0].name if groups else None) or ""


@dataclass
class GpuNodeGroupArgs:
    config: GpuNodesConfig
    cluster: eks.Cluster
    cluster_name: str
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    cluster_security_group_id: pulumi.Input[str]  # the group EKS created for the cluster
    node_role: PolicyRole
    depends_on: Sequence[pulumi.Resource]
    price: PriceQuote  # one node-hour's price, as the preview read it (infra/prices.py)


class GpuNodeGroup(pulumi.ComponentResource):
    """GPU nodes wired for EFA in one AZ."""

    node_group_name: pulumi.Output[str]
    autoscaling_group_name: pulumi.Output[str]

    def __init__(self, name: str, args: GpuNodeGroupArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fsdp-eks:infra:GpuNodeGroup", name, None, opts)
        cfg, child = args.config, pulumi.ResourceOptions(parent=self)
        instance = cfg.instance
        efa_sg = aws.ec2.SecurityGroup(
            f"{name}-efa",
            vpc_id=args.vpc_id,
            description="EFA: all traffic between members, as the EFA user guide requires",
            tags={"Name": f"{args.cluster_name}-efa"},
            opts=child,
        )
        # EFA's SRD traffic must be allowed in and out between every member of the group, all protocols.
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-efa-in",
            security_group_id=efa_sg.id,
            referenced_security_group_id=efa_sg.id,
            ip_protocol="-1",
            description="EFA from group members",
            opts=child,
        )
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-efa-out",
            security_group_id=efa_sg.id,
            referenced_security_group_id=efa_sg.id,
            ip_protocol="-1",
            description="EFA to group members",
            opts=child,
        )
        efa_count = instance.efa_interfaces if cfg.efa_enabled else 0
        template = aws.ec2.LaunchTemplate(
            f"{name}-template",
            description=f"{instance.name} nodes with {efa_count} EFA interfaces",
            update_default_version=True,
            **self._network(cfg, efa_sg.id, args.cluster_security_group_id),
            metadata_options=METADATA_OPTIONS,
            block_device_mappings=[root_volume(cfg.root_volume_gib, ROOT_VOLUME_IOPS, ROOT_VOLUME_THROUGHPUT_MIBPS)],
            placement=self._placement(name, cfg),
            **self._capacity(cfg),
            user_data=base64.b64encode(hugepages_user_data().encode()).decode() if cfg.efa_enabled else None,
            tag_specifications=instance_name_tags(f"{args.cluster_name}-gpu"),
            opts=child,
        )
        label_key, label_value = GPU_NODE_GROUP_LABEL
        repair = node_repair_config(cfg)
        pulumi.runtime.register_resource_transform(lambda args: with_node_repair(args, f"{name}-nodes", repair))
        self.node_group = eks.ManagedNodeGroup(
            f"{name}-nodes",
            cluster=args.cluster,
            # A prefix, not a fixed name: a change that replaces the group (instance type, AZ, capacity type)
            # creates the new group beside the old one instead of colliding with its name.
            node_group_name_prefix=node_group_name_prefix(args.cluster_name, GPU_NODE_GROUP_NAME),
            # The control plane's version, spelt out: pulumi-eks sets it only without a launch template
            # (infra/cluster.py).
            version=args.cluster.eks_cluster.version,
            node_role=args.node_role.role,
            subnet_ids=[args.subnet_id],  # one subnet, one AZ: EFA does not cross AZs
            # A capacity block names its instance type in the launch template only; EKS refuses it in both places.
            instance_types=None if cfg.capacity_type == "CAPACITY_BLOCK" else [instance.name],
            ami_type=GPU_AMI_TYPE,
            capacity_type=cfg.capacity_type,
            # Between 0 (or count, keeping idle nodes) and count + spares, count to start with; the Cluster
            # Autoscaler moves the desired size within them (stack/gpu_autoscaling.py), and pulumi-eks then leaves
            # it alone (ignoreScalingChanges: ignoreChanges on scalingConfig.desiredSize, nodejs/eks/nodes/
            # nodegroup.ts createManagedNodeGroup), so an update never undoes the autoscaler's work.
            scaling_config={
                "min_size": min_size(cfg),
                "desired_size": cfg.count,
                "max_size": max_size(cfg),
            },
            ignore_scaling_changes=autoscaled(cfg),
            launch_template={"id": template.id, "version": template.latest_version.apply(str)},
            taints=[GPU_TAINT],
            labels={
                label_key: label_value,
                EFA_LABEL: efa_label_value(cfg.efa_enabled),
                AUTOSCALER_GPU_LABEL: AUTOSCALER_GPU_TYPES[instance.gpu_chip],
            },
            # What the autoscaler needs to scale the group up from zero (node_template_tags), and the price the
            # preview read, which the cost policy budgets with (stack/price_list.py PRICE_TAG_KEY).
            tags={**node_template_tags(cfg), PRICE_TAG_KEY: f"{args.price.usd_per_hour:g}"},
            # The node role's policies are attached before the nodes start and detached after they are gone.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.depends_on, *args.node_role.attachments]),
        )
        # The name EKS gave the group (the prefix and a unique suffix), read back from the aws.eks.NodeGroup, and the
        # Auto Scaling group EKS made for it, which the Cluster Autoscaler scales (EKS API reference,
        # NodegroupResources.autoScalingGroups).
        self.node_group_name = self.node_group.node_group.node_group_name
        # (Through apply: an Output's own `resources` method hides the attribute of that name.)
        self.autoscaling_group_name = self.node_group.node_group.apply(lambda group: group.resources).apply(
            autoscaling_group_of
        )
        if warning := reserved_capacity_warning(cfg):
            pulumi.log.warn(warning, resource=self)
        self.register_outputs({"nodeGroupName": self.node_group_name})

    @staticmethod
    def _network(cfg: GpuNodesConfig, efa_group: pulumi.Input[str], cluster_group: pulumi.Input[str]) -> dict[str, Any]:
        """Security groups at the interface level with EFA, at the instance level without (EKS refuses both)."""
        if cfg.efa_enabled:
            return {"network_interfaces": efa_network_interfaces(cfg.instance, efa_group, cluster_group)}
        return {"vpc_security_group_ids": [cluster_group]}

    def _placement(self, name: str, cfg: GpuNodesConfig) -> aws.ec2.LaunchTemplatePlacementArgsDict | None:
        if cfg.placement_group_name is not None:
            return {"group_name": cfg.placement_group_name}
        if not cfg.uses_placement_group:
            return None
        group = aws.ec2.PlacementGroup(
            f"{name}-placement", strategy="cluster", opts=pulumi.ResourceOptions(parent=self)
        )
        return {"group_name": group.name}

    @staticmethod
    def _capacity(cfg: GpuNodesConfig) -> dict[str, Any]:
        """Reservation, market and instance type settings. A capacity block needs all three in the launch template
        (EKS user guide, "Create a managed node group with Capacity Blocks for ML")."""
        settings: dict[str, Any] = {}
        if cfg.capacity_reservation_id:
            settings["capacity_reservation_specification"] = {
                "capacity_reservation_target": {"capacity_reservation_id": cfg.capacity_reservation_id}
            }
        if cfg.capacity_type == "CAPACITY_BLOCK":
            settings["instance_market_options"] = {"market_type": "capacity-block"}
            settings["instance_type"] = cfg.instance.name
        return settings
