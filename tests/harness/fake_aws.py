"""What AWS returns for each aws:* resource type the program registers: the id in the form the service forms
it, and the computed outputs with the values the service would give them.

Each model reads only the resource's own inputs. Sources: EC2, IAM, KMS, CloudWatch Logs, FSx, ECR and EKS API
references for id and ARN formats; the pulumi-aws resource docs for which attribute is the id
(an EKS add-on's id is "cluster:addon", a log group's id is its name, an ECR repository's id is its name).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.harness.fake_ids import (
    ACCOUNT,
    arn,
    auto_name,
    digest,
    ec2_id,
    key_uuid,
    prefixed_unique_id,
    role_unique_id,
)

Model = Callable[[str, dict[str, Any], str], tuple[str, dict[str, Any]]]


def _ec2(prefix: str, resource: str | None = None) -> Model:
    """A plain EC2 resource: `prefix-<17 hex>`, with an ARN when EC2 gives the type one."""

    def model(name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
        resource_id = ec2_id(prefix, name)
        outputs: dict[str, Any] = {"ownerId": ACCOUNT}
        if resource:
            outputs["arn"] = arn("ec2", region, f"{resource}/{resource_id}")
        return resource_id, outputs

    return model


def _security_group(name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    group_id = ec2_id("sg", name)
    return group_id, {
        "arn": arn("ec2", region, f"security-group/{group_id}"),
        "name": inputs.get("name") or auto_name(name),
        "ownerId": ACCOUNT,
    }


def _security_group_rule(name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    rule_id = ec2_id("sgr", name)
    return rule_id, {"arn": arn("ec2", region, f"security-group-rule/{rule_id}"), "securityGroupRuleId": rule_id}


def _launch_template(name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    template_id = ec2_id("lt", name)
    return template_id, {
        "arn": arn("ec2", region, f"launch-template/{template_id}"),
        "name": inputs.get("name") or auto_name(name),
        "latestVersion": 1,
        "defaultVersion": 1,
    }


def _placement_group(name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    # The id of an aws.ec2.PlacementGroup is its name; EC2's own pg-... id is `placementGroupId`.
    group_name = inputs.get("name") or auto_name(name)
    return group_name, {
        "name": group_name,
        "placementGroupId": ec2_id("pg", name),
        "arn": arn("ec2", region, f"placement-group/{group_name}"),
    }


def _nat_gateway(name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    return ec2_id("nat", name), {
        "networkInterfaceId": ec2_id("eni", name),
        "privateIp": "10.0.32.10",
        "publicIp": "198.51.100.10",
    }


def _eip(name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    allocation = ec2_id("eipalloc", name)
    return allocation, {"allocationId": allocation, "publicIp": "198.51.100.10", "domain": "vpc"}


def _role(name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    role_name = inputs.get("name") or auto_name(name)
    return role_name, {
        "name": role_name,
        # A role's ARN carries its path (IAM user guide, "IAM identifiers": arn:aws:iam::ACCOUNT:role/PATH/NAME).
        "arn": f"arn:aws:iam::{ACCOUNT}:role{inputs.get('path') or '/'}{role_name}",
        "uniqueId": role_unique_id(name),
        "createDate": "2026-01-01T00:00:00Z",
    }


def _role_policy_attachment(name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    # The provider's id for an attachment is the role name and a unique suffix (PrefixedUniqueId).
    return prefixed_unique_id(f"{inputs['role']}-", name), {}


def _policy(name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    # A customer managed policy's provider id is its ARN, which includes its path (IAM user guide, "IAM
    # identifiers"); IAM policy ids are "ANPA" and 17 upper-case alphanumerics.
    policy_name = inputs.get("name") or auto_name(name)
    policy_arn = f"arn:aws:iam::{ACCOUNT}:policy{inputs.get('path') or '/'}{policy_name}"
    return policy_arn, {
        "name": policy_name,
        "arn": policy_arn,
        "policyId": "ANPA" + digest("policy", name)[:17].upper(),
        "attachmentCount": 0,
    }


def _pod_identity_association(name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    # EKS association ids are "a-" and 17 lowercase alphanumerics; the provider's id is "cluster,association id"
    # (pulumi-aws eks.PodIdentityAssociation import form).
    cluster, association = inputs["clusterName"], f"a-{digest('association', name)[:17]}"
    return f"{cluster},{association}", {
        "associationId": association,
        "associationArn": arn("eks", region, f"podidentityassociation/{cluster}/{association}"),
        "externalId": key_uuid("association", name),
    }


def _kms_key(name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    key_id = key_uuid(name)
    return key_id, {"keyId": key_id, "arn": arn("kms", region, f"key/{key_id}")}


def _log_group(name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    group_name = inputs.get("name") or auto_name(name)
    return group_name, {"name": group_name, "arn": arn("logs", region, f"log-group:{group_name}")}


def _lustre(name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    fs_id = ec2_id("fs", name)
    # FSx mount names are 8 lowercase alphanumerics for PERSISTENT_2 (FSx API reference, LustreFileSystemConfiguration).
    return fs_id, {
        "arn": arn("fsx", region, f"file-system/{fs_id}"),
        "dnsName": f"{fs_id}.fsx.{region}.amazonaws.com",
        "mountName": digest("mount", name)[:8],
        "networkInterfaceIds": [ec2_id("eni", name, "fsx")],
        "ownerId": ACCOUNT,
    }


def _ebs_volume(name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    """gp3's baseline when none is asked for: 3000 IOPS and 125 MiB/s (EBS user guide, "General Purpose SSD
    volumes"); encrypted without a key: the account's default EBS key."""
    volume_id = ec2_id("vol", name)
    outputs: dict[str, Any] = {"arn": arn("ec2", region, f"volume/{volume_id}"), "createTime": "2026-01-01T00:00:00Z"}
    if inputs.get("type") == "gp3":
        outputs |= {"iops": inputs.get("iops", 3000), "throughput": inputs.get("throughput", 125)}
    if inputs.get("encrypted") and not inputs.get("kmsKeyId"):
        outputs["kmsKeyId"] = arn("kms", region, f"key/{key_uuid(name, 'aws/ebs')}")
    return volume_id, outputs


def _addon(name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    cluster, addon = inputs["clusterName"], inputs["addonName"]
    return f"{cluster}:{addon}", {
        "arn": arn("eks", region, f"addon/{cluster}/{addon}/{key_uuid(name)}"),
        "createdAt": "2026-01-01T00:00:00Z",
        "modifiedAt": "2026-01-01T00:00:00Z",
    }


def _repository(name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    repository = inputs.get("name") or auto_name(name)
    return repository, {
        "name": repository,
        "arn": arn("ecr", region, f"repository/{repository}"),
        "registryId": ACCOUNT,
        "repositoryUrl": f"{ACCOUNT}.dkr.ecr.{region}.amazonaws.com/{repository}",
    }


def _lifecycle_policy(name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    return inputs["repository"], {"registryId": ACCOUNT}


def _bucket(name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    """An S3 bucket's provider id is its name: `bucket`, else `bucketPrefix` and the provider's 26-character unique
    suffix (pulumi-aws s3.Bucket: "Creates a unique bucket name beginning with the specified prefix"), else an
    auto-name. Its ARN has no region or account (Amazon S3 user guide, "Policy resources for Amazon S3")."""
    bucket = inputs.get("bucket") or (
        prefixed_unique_id(inputs["bucketPrefix"], name) if inputs.get("bucketPrefix") else auto_name(name).lower()
    )
    return bucket, {
        "bucket": bucket,
        "arn": f"arn:aws:s3:::{bucket}",
        "bucketDomainName": f"{bucket}.s3.amazonaws.com",
        "bucketRegionalDomainName": f"{bucket}.s3.{region}.amazonaws.com",
        "bucketRegion": region,
        "region": region,
    }


def _bucket_configuration(name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    """A bucket's versioning, encryption, public access block, ownership controls, lifecycle and policy: the
    provider's id is the bucket's name (pulumi-aws import forms of each, without an expected bucket owner)."""
    return inputs["bucket"], {"region": region}


AWS_MODELS: dict[str, Model] = {
    "aws:ec2/vpc:Vpc": _ec2("vpc", "vpc"),
    "aws:ec2/subnet:Subnet": _ec2("subnet", "subnet"),
    "aws:ec2/internetGateway:InternetGateway": _ec2("igw", "internet-gateway"),
    "aws:ec2/eip:Eip": _eip,
    "aws:ec2/natGateway:NatGateway": _nat_gateway,
    "aws:ec2/routeTable:RouteTable": _ec2("rtb", "route-table"),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": _ec2("rtbassoc"),
    "aws:ec2/vpcEndpoint:VpcEndpoint": _ec2("vpce", "vpc-endpoint"),
    "aws:ec2/securityGroup:SecurityGroup": _security_group,
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": _security_group_rule,
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": _security_group_rule,
    "aws:ec2/launchTemplate:LaunchTemplate": _launch_template,
    "aws:ec2/placementGroup:PlacementGroup": _placement_group,
    "aws:iam/role:Role": _role,
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": _role_policy_attachment,
    "aws:iam/policy:Policy": _policy,
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": _pod_identity_association,
    "aws:kms/key:Key": _kms_key,
    "aws:cloudwatch/logGroup:LogGroup": _log_group,
    "aws:fsx/lustreFileSystem:LustreFileSystem": _lustre,
    "aws:eks/addon:Addon": _addon,
    "aws:ebs/volume:Volume": _ebs_volume,
    "aws:ecr/repository:Repository": _repository,
    "aws:ecr/lifecyclePolicy:LifecyclePolicy": _lifecycle_policy,
    "aws:s3/bucket:Bucket": _bucket,
    "aws:s3/bucketVersioning:BucketVersioning": _bucket_configuration,
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": _bucket_configuration,
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": _bucket_configuration,
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": _bucket_configuration,
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": _bucket_configuration,
    "aws:s3/bucketPolicy:BucketPolicy": _bucket_configuration,
}


def aws_invoke(token: str, args: dict[str, Any], region: str) -> dict[str, Any] | None:
    """The data sources the program calls, answered as AWS would; None for a token this fake does not know."""
    if token == "aws:index/getPartition:getPartition":
        return {"partition": "aws", "dnsSuffix": "amazonaws.com", "reverseDnsPrefix": "com.amazonaws", "id": "aws"}
    if token == "aws:index/getCallerIdentity:getCallerIdentity":
        return {
            "accountId": ACCOUNT,
            "arn": f"arn:aws:sts::{ACCOUNT}:assumed-role/deployer/session",
            "userId": "AROADEPLOYER:session",
            "id": ACCOUNT,
        }
    if token == "aws:index/getRegion:getRegion":
        return {"name": region, "region": region, "endpoint": f"ec2.{region}.amazonaws.com", "id": region}
    if token == "aws:eks/getAddonVersion:getAddonVersion":
        addon = args["addonName"]
        return {
            "addonName": addon,
            "version": f"v1.0.0-eksbuild.{int(digest(addon)[:2], 16)}",
            "kubernetesVersion": args["kubernetesVersion"],
            "id": addon,
        }
    return None
