"""The GPU node group: a launch template with one EFA interface per network card, a cluster placement group,
capacity reservations and capacity blocks, all in one AZ, attached to the cluster as a managed node group.

Everything whose correctness matters (interface layout, security group rules, placement, metadata options) is
built here from pulumi_aws resources, so tests see it under mocks; pulumi_eks.ManagedNodeGroup only attaches it.
"""

from __future__ import annotations

import base64
import textwrap
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks

from infra.catalog import InstanceType
from infra.config import GpuNodesConfig
from infra.versions import GPU_AMI_TYPE

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}
GPU_NODE_GROUP_LABEL = ("fsdp-eks/node-group", "gpu")
# libfabric's EFA provider registers its bounce buffers in 2 MiB huge pages; the job requests them as
# hugepages-2Mi, so the kubelet must see them when it starts. 5128 pages (~10 GiB) covers 8 ranks per node
# with the 5120 MiB per pod that the EFA device plugin's examples request, plus slack.
EFA_HUGEPAGES_2MI = 5128


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
    huge pages before the kubelet starts."""
    return textwrap.dedent(
        f"""\
        MIME-Version: 1.0
        Content-Type: multipart/mixed; boundary="==FSDPEKS=="

        --==FSDPEKS==
        Content-Type: text/x-shellscript; charset="us-ascii"

        #!/bin/bash
        set -euo pipefail
        echo "vm.nr_hugepages = {EFA_HUGEPAGES_2MI}" > /etc/sysctl.d/90-efa-hugepages.conf
        sysctl -w vm.nr_hugepages={EFA_HUGEPAGES_2MI}

        --==FSDPEKS==--
        """
    )


@dataclass
class GpuNodeGroupArgs:
    config: GpuNodesConfig
    cluster: eks.Cluster
    cluster_name: str
    availability_zone: str
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    cluster_security_group_id: pulumi.Input[str]
    node_role: aws.iam.Role
    depends_on: list[pulumi.Resource]


class GpuNodeGroup(pulumi.ComponentResource):
    """GPU nodes wired for EFA in one AZ."""

    node_group_name: str

    def __init__(self, name: str, args: GpuNodeGroupArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fsdp-eks:infra:GpuNodeGroup", name, None, opts)
        cfg, child = args.config, pulumi.ResourceOptions(parent=self)
        instance = cfg.instance
        self.node_group_name = f"{args.cluster_name}-gpu"
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
        placement_group = (
            aws.ec2.PlacementGroup(f"{name}-placement", strategy="cluster", opts=child)
            if cfg.uses_placement_group
            else None
        )
        efa_count = instance.efa_interfaces if cfg.efa_enabled else 0
        template = aws.ec2.LaunchTemplate(
            f"{name}-template",
            description=f"{instance.name} nodes with {efa_count} EFA interfaces",
            update_default_version=True,
            network_interfaces=(
                efa_network_interfaces(instance, efa_sg.id, args.cluster_security_group_id) if cfg.efa_enabled else None
            ),
            vpc_security_group_ids=None if cfg.efa_enabled else [args.cluster_security_group_id],
            metadata_options={
                "http_endpoint": "enabled",
                "http_tokens": "required",  # IMDSv2 only
                # Containers sit one hop behind the node; with the default limit of 1 their IMDSv2 calls fail.
                "http_put_response_hop_limit": 2,
            },
            block_device_mappings=[
                {
                    "device_name": "/dev/xvda",
                    "ebs": {
                        "volume_size": cfg.root_volume_gib,
                        "volume_type": "gp3",
                        "iops": 16000,  # gp3 maxima: image pulls of multi-GB training images are I/O bound
                        "throughput": 1000,
                        "encrypted": "true",
                        "delete_on_termination": "true",
                    },
                }
            ],
            placement={"group_name": placement_group.name} if placement_group else None,
            capacity_reservation_specification=(
                {"capacity_reservation_target": {"capacity_reservation_id": cfg.capacity_reservation_id}}
                if cfg.capacity_reservation_id
                else None
            ),
            instance_market_options=(
                {"market_type": "capacity-block"} if cfg.capacity_type == "CAPACITY_BLOCK" else None
            ),
            user_data=base64.b64encode(hugepages_user_data().encode()).decode() if cfg.efa_enabled else None,
            tag_specifications=[
                {"resource_type": "instance", "tags": {"Name": self.node_group_name}},
            ],
            opts=child,
        )
        label_key, label_value = GPU_NODE_GROUP_LABEL
        self.node_group = eks.ManagedNodeGroup(
            f"{name}-nodes",
            cluster=args.cluster,
            node_group_name=self.node_group_name,
            node_role=args.node_role,
            subnet_ids=[args.subnet_id],  # one subnet, one AZ: EFA does not cross AZs
            instance_types=[instance.name],
            ami_type=GPU_AMI_TYPE,
            capacity_type=cfg.capacity_type,
            scaling_config={
                "min_size": cfg.count,
                "desired_size": cfg.count,
                "max_size": max(cfg.count, 1),  # EKS requires max >= 1, also when scaled to zero
            },
            launch_template={"id": template.id, "version": template.latest_version.apply(str)},
            taints=[GPU_TAINT],
            labels={label_key: label_value, "fsdp-eks/efa": str(cfg.efa_enabled).lower()},
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on),
        )
        self.register_outputs({"nodeGroupName": self.node_group_name})
