"""The FSx for Lustre file system that holds the checkpoints, in the GPU nodes' AZ, and the CSI driver that mounts it.

The component keeps its type token `fsdp-eks:infra:CheckpointStorage`: it is part of every deployed stack's URNs.

Every rank writes its shard of a checkpoint at once, and a save commits by renaming a directory: Lustre takes both
(S3 mounts cannot rename; EFS is far slower for many parallel writers). See docs/job.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from stack.config import StorageConfig
from stack.file_system import LustreFileSystem

# Lustre's ports (FSx for Lustre user guide, "File system access control with Amazon VPC"): 988 for LNet, and
# 1018-1023, the reserved ports Lustre connections are made from. The file system's group admits them from the
# clients and from itself (the guide's "Creating an FSx for Lustre file system fails" quotes FSx's check of 988). The
# clients' side, the nodes' group admitting them from the file system's group, follows DataSync's FSx for Lustre
# location reference ("The file system must also allow access from the security groups", both directions; how far
# that was checked: docs/versions.md). The rules admit only those ports, only from the file system's group.
LUSTRE_PORTS = ((988, 988), (1018, 1023))


@dataclass
class CheckpointStorageArgs:
    config: StorageConfig
    cluster_name: str
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]  # the GPU nodes' subnet: Lustre lives in one AZ, next to its clients
    client_security_group_id: pulumi.Input[str]  # the EKS cluster security group, which every node's primary ENI has


class CheckpointStorage(pulumi.ComponentResource):
    """An FSx for Lustre file system reachable from the cluster's nodes."""

    file_system: LustreFileSystem[pulumi.Output[str]]
    """What the training job mounts (stack/file_system.py)."""

    def __init__(self, name: str, args: CheckpointStorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fsdp-eks:infra:CheckpointStorage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        group = aws.ec2.SecurityGroup(
            f"{name}-lustre",
            vpc_id=args.vpc_id,
            description="FSx for Lustre: clients and servers",
            tags={"Name": f"{args.cluster_name}-lustre"},
            opts=child,
        )
        rules: list[pulumi.Resource] = []
        for low, high in LUSTRE_PORTS:
            for source, label in ((args.client_security_group_id, "nodes"), (group.id, "self")):
                rule = aws.vpc.SecurityGroupIngressRule(
                    f"{name}-lustre-{label}-{low}",
                    security_group_id=group.id,
                    referenced_security_group_id=source,
                    ip_protocol="tcp",
                    from_port=low,
                    to_port=high,
                    description=f"Lustre from {label}",
                    opts=child,
                )
                rules.append(rule)
        # The clients' side: every node's primary interface is in the EKS cluster security group, which admits only
        # its own members (and the control plane) until these rules let the file system's servers in.
        for low, high in LUSTRE_PORTS:
            rule = aws.vpc.SecurityGroupIngressRule(
                f"{name}-lustre-clients-{low}",
                security_group_id=args.client_security_group_id,
                referenced_security_group_id=group.id,
                ip_protocol="tcp",
                from_port=low,
                to_port=high,
                description="Lustre from the checkpoint file system",
                opts=child,
            )
            rules.append(rule)
        egress = aws.vpc.SecurityGroupEgressRule(
            f"{name}-lustre-out",
            security_group_id=group.id,
            cidr_ipv4="0.0.0.0/0",
            ip_protocol="-1",
            description="Lustre replies and server traffic",
            opts=child,
        )
        cfg = args.config
        # FSx checks the group's rules when it creates the file system and fails if port 988 is not open ("The
        # file system cannot be created because ... the provided security groups do not permit Lustre LNET network
        # traffic on port 988", FSx for Lustre user guide, "Creating an FSx for Lustre file system fails"); the
        # rules are resources of their own, so the file system waits for them.
        file_system = aws.fsx.LustreFileSystem(
            f"{name}-fsx",
            storage_capacity=cfg.fsx_capacity_gib,
            deployment_type="PERSISTENT_2",  # replicated within the AZ: a server fault loses no checkpoint
            per_unit_storage_throughput=cfg.fsx_throughput_per_tib,
            data_compression_type="LZ4",
            file_system_type_version="2.15",
            subnet_ids=args.subnet_id,
            security_group_ids=[group.id],
            tags={"Name": f"{args.cluster_name}-checkpoints"},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*rules, egress]),
        )
        self.file_system = LustreFileSystem(
            file_system.id, file_system.dns_name, file_system.mount_name, cfg.fsx_capacity_gib
        )
        self.register_outputs({"fileSystemId": file_system.id, "dnsName": file_system.dns_name})
