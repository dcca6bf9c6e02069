"""Whether EC2 would launch the GPU nodes: the vCPU quota of their family, and the type's offering in their AZ.

Without them the node group fails 35 to 45 minutes into `pulumi up` with `VcpuLimitExceeded` or `Unsupported`
(docs/aws.md, "Failures AWS can still answer with").
"""

from __future__ import annotations

from preflight.aws import Client, aws_errors, error_code, error_text
from preflight.findings import Finding, ok, problem
from stack.config import StackConfig
from stack.fields import NAMESPACE

QUOTA_CHECK = "EC2 quota"
OFFERING_CHECK = "GPU AZ"
# EC2's vCPU quotas by instance family and purchase option, as Service Quotas names them (service code ec2).
# Instances launched into an On-Demand Capacity Reservation run On-Demand and count against the On-Demand quota.
QUOTAS: dict[tuple[str, str], tuple[str, str]] = {
    ("P", "ON_DEMAND"): ("L-417A185B", "Running On-Demand P instances"),
    ("G", "ON_DEMAND"): ("L-DB2E81BA", "Running On-Demand G and VT instances"),
    ("P", "SPOT"): ("L-7212CCBC", "All P Spot Instance Requests"),
    ("G", "SPOT"): ("L-3819A6DF", "All G and VT Spot Instance Requests"),
}


def quota_of(instance_type: str, capacity_type: str) -> tuple[str, str] | None:
    """(quota code, quota name) that limits the vCPUs of `instance_type` bought as `capacity_type`; None where the
    preflight knows none (a capacity block, a family outside P and G)."""
    return QUOTAS.get((instance_type[0].upper(), capacity_type))


def applied_quota(quotas: Client, code: str) -> float:
    """The quota's value in the client's region: the applied one, or AWS's default where none was ever applied
    (GetServiceQuota answers NoSuchResourceException then)."""
    from botocore.exceptions import ClientError

    try:
        return float(quotas.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"])
    except ClientError as error:
        if error_code(error) != "NoSuchResourceException":
            raise
    return float(quotas.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"])


def quota_findings(config: StackConfig, quotas: Client) -> list[Finding]:
    gpu = config.gpu_nodes
    quota = quota_of(gpu.instance_type, gpu.capacity_type)
    if quota is None:
        return [ok(QUOTA_CHECK, f"not checked for {gpu.capacity_type} {gpu.instance_type}: no vCPU quota known")]
    code, name = quota
    needed = gpu.count * gpu.instance.vcpus
    try:
        value = applied_quota(quotas, code)
    except aws_errors() as error:
        return [
            problem(
                QUOTA_CHECK,
                f'cannot read "{name}" ({code}) in {config.region}: {error_text(error)}',
                "allow servicequotas:GetServiceQuota and GetAWSDefaultServiceQuota, or read the quota in the Service "
                "Quotas console",
            )
        ]
    if value < needed:
        return [
            problem(
                QUOTA_CHECK,
                f'"{name}" is {value:.0f} vCPUs in {config.region}; {gpu.count} x {gpu.instance_type} need {needed} '
                "(running instances of the family count against it too)",
                f"aws service-quotas request-service-quota-increase --region {config.region} --service-code ec2 "
                f"--quota-code {code} --desired-value {needed}",
            )
        ]
    return [ok(QUOTA_CHECK, f'"{name}" is {value:.0f} vCPUs in {config.region}; the nodes need {needed}')]


def offering_azs(ec2: Client, instance_type: str) -> list[str]:
    """The AZs of the client's region that offer `instance_type`, in the caller's AZ names."""
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": [instance_type]}]
    )
    return sorted({offer["Location"] for page in pages for offer in page["InstanceTypeOfferings"]})


def offering_findings(config: StackConfig, ec2: Client) -> list[Finding]:
    instance_type, az = config.gpu_nodes.instance_type, config.gpu_availability_zone
    try:
        offered = offering_azs(ec2, instance_type)
    except aws_errors() as error:
        return [
            problem(
                OFFERING_CHECK,
                f"cannot list the AZs offering {instance_type}: {error_text(error)}",
                "allow ec2:DescribeInstanceTypeOfferings",
            )
        ]
    if az in offered:
        return [ok(OFFERING_CHECK, f"{az} offers {instance_type}")]
    if not offered:
        return [
            problem(
                OFFERING_CHECK,
                f"no AZ of {config.region} offers {instance_type}",
                f"set aws:region to a region that offers it, or {NAMESPACE}:gpuNodes.instanceType to another type",
            )
        ]
    choice = offered[0]
    network = (
        ""
        if config.network.uses_existing_vpc or choice in config.availability_zones
        else (f" and add it to {NAMESPACE}:network.availabilityZones")
    )
    return [
        problem(
            OFFERING_CHECK,
            f"{az} does not offer {instance_type}; {', '.join(offered)} do",
            f"pulumi config set --path {NAMESPACE}:gpuNodes.availabilityZone {choice}{network} (where your capacity "
            "is)",
        )
    ]
