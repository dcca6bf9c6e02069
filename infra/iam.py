"""IAM for the cluster's nodes and pods, and the key policy of the cluster's KMS key: pure policy documents plus
one small role helper.

Nodes get only what the kubelet needs; everything a pod needs in AWS comes through EKS Pod Identity, with a role
whose trust policy names the one namespace, service account and cluster allowed to use it. Pods cannot borrow the
node's role: the launch templates set the metadata hop limit to 1 (infra/launch_templates.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

# Managed policies a node of a managed node group needs (EKS user guide, "Amazon EKS node IAM role"):
# AmazonEKSWorkerNodePolicy for the kubelet, AmazonEC2ContainerRegistryPullOnly to pull images (ecr:
# GetAuthorizationToken, BatchGetImage, GetDownloadUrlForLayer; AWS managed policy reference, created 2024-10-04),
# and SSM so an operator can open a shell on a GPU node without SSH keys or open ports. No AmazonEKS_CNI_Policy:
# the VPC CNI gets it through its own Pod Identity association (infra/addons.py).
NODE_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
)
POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"


@dataclass(frozen=True)
class PodIdentity:
    """The one Kubernetes service account allowed to assume a Pod Identity role."""

    namespace: str
    service_account: str


def cluster_arn(partition: str, region: str, account: str, cluster_name: str) -> str:
    return f"arn:{partition}:eks:{region}:{account}:cluster/{cluster_name}"


def node_trust_policy() -> str:
    """EC2 instances (the node group's nodes) may assume the node role."""
    statement = {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


def pod_identity_trust_policy(identity: PodIdentity, eks_cluster_arn: str) -> str:
    """EKS Pod Identity may assume the role for `identity` in this cluster only. EKS Auth sends the pod's
    namespace, service account and cluster as request tags when it assumes the role (EKS user guide, "Create IAM
    role with trust policy required by EKS Pod Identity"), so the trust policy can require them."""
    statement = {
        "Sid": "AllowEksAuthToAssumeRoleForPodIdentity",
        "Effect": "Allow",
        "Principal": {"Service": POD_IDENTITY_PRINCIPAL},
        "Action": ["sts:AssumeRole", "sts:TagSession"],
        "Condition": {
            "StringEquals": {
                "aws:RequestTag/kubernetes-namespace": identity.namespace,
                "aws:RequestTag/kubernetes-service-account": identity.service_account,
                "aws:RequestTag/eks-cluster-arn": eks_cluster_arn,
            }
        },
    }
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


def key_policy(partition: str, account: str) -> str:
    """The KMS key's policy, spelt out: the account's IAM policies decide who may use the key (the statement AWS
    KMS writes as the default key policy). Whoever creates the cluster needs kms:DescribeKey and kms:CreateGrant
    through IAM; EKS then uses a grant."""
    statement = {
        "Sid": "EnableIamPolicies",
        "Effect": "Allow",
        "Principal": {"AWS": f"arn:{partition}:iam::{account}:root"},
        "Action": "kms:*",
        "Resource": "*",
    }
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


def managed_policy_arn(partition: pulumi.Input[str], policy: str) -> pulumi.Output[str]:
    """An AWS managed policy's ARN; `policy` may carry a path prefix such as 'service-role/'."""
    return pulumi.Output.concat("arn:", partition, ":iam::aws:policy/", policy)


@dataclass(frozen=True)
class PolicyRole:
    """A role and the attachments of its managed policies. Whatever runs with the role depends on `attachments`,
    not only on the role: the role exists before its policies are attached, and `pulumi destroy` would otherwise
    detach them while that user is still being deleted (the AWS provider's aws_eks_node_group documentation: "Ensure
    that IAM Role permissions are created before and deleted after EKS Node Group handling. Otherwise, EKS will not
    be able to properly delete EC2 Instances and Elastic Network Interfaces.")."""

    role: aws.iam.Role
    attachments: tuple[aws.iam.RolePolicyAttachment, ...]


def role_with_policies(
    name: str,
    trust_policy: pulumi.Input[str],
    policy_names: tuple[str, ...],
    partition: pulumi.Input[str],
    parent: pulumi.Resource,
) -> PolicyRole:
    """A role with the AWS managed policies `policy_names` attached, the attachments parented like the role."""
    opts = pulumi.ResourceOptions(parent=parent)
    role = aws.iam.Role(name, assume_role_policy=trust_policy, opts=opts)
    attachments = tuple(
        aws.iam.RolePolicyAttachment(
            f"{name}-{policy.rsplit('/', 1)[-1]}",
            role=role.name,
            policy_arn=managed_policy_arn(partition, policy),
            opts=opts,
        )
        for policy in policy_names
    )
    return PolicyRole(role, attachments)
