"""What every node launch template of the stack shares: the instance metadata settings and the root volume.

Both node groups bring their own template, because the one EKS makes when there is none allows containers to
reach the instance metadata service (hop limit 2, EKS user guide "Customize managed nodes with launch templates").
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

# IMDSv2 only, with a response hop limit of 1: processes on the node and host-network pods (kubelet, VPC CNI,
# kube-proxy, the Pod Identity agent) reach the metadata service; a pod in its own network namespace is one hop
# further and gets no answer, so it cannot take the node role's credentials (EKS best practices guide, "Restrict
# access to the instance profile assigned to the worker node"). Pods that need AWS use EKS Pod Identity.
IMDS_HOP_LIMIT = 1
METADATA_OPTIONS: aws.ec2.LaunchTemplateMetadataOptionsArgsDict = {
    "http_endpoint": "enabled",
    "http_tokens": "required",
    "http_put_response_hop_limit": IMDS_HOP_LIMIT,
}
ROOT_DEVICE = "/dev/xvda"  # the root device name of the EKS-optimised Amazon Linux 2023 AMIs


def root_volume(
    size_gib: int, iops: int | None = None, throughput_mibps: int | None = None
) -> aws.ec2.LaunchTemplateBlockDeviceMappingArgsDict:
    """An encrypted gp3 root volume, deleted with the instance; gp3's baseline (3000 IOPS, 125 MiB/s) unless set."""
    ebs: aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgsDict = {
        "volume_size": size_gib,
        "volume_type": "gp3",
        "encrypted": "true",
        "delete_on_termination": "true",
    }
    if iops is not None:
        ebs["iops"] = iops
    if throughput_mibps is not None:
        ebs["throughput"] = throughput_mibps
    return {"device_name": ROOT_DEVICE, "ebs": ebs}


def instance_name_tags(name: pulumi.Input[str]) -> list[aws.ec2.LaunchTemplateTagSpecificationArgsDict]:
    """Name tag for the instances and their volumes, so the console shows which group a node belongs to."""
    return [{"resource_type": kind, "tags": {"Name": name}} for kind in ("instance", "volume")]
