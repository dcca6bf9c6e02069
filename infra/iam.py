"""IAM roles the cluster's nodes and add-ons assume. Pure policy documents plus one small role helper."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

# Managed policies a node of a managed node group needs (EKS user guide, "Amazon EKS node IAM role"), plus SSM so
# an operator can open a shell on a GPU node without SSH keys or open ports.
NODE_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryReadOnly",
    "AmazonSSMManagedInstanceCore",
)


def assume_role_policy(service: str, *, tag_session: bool = False) -> str:
    """Trust policy letting an AWS service principal assume the role. EKS Pod Identity also needs sts:TagSession."""
    actions = ["sts:AssumeRole", "sts:TagSession"] if tag_session else "sts:AssumeRole"
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": actions}],
        }
    )


def role_with_policies(
    name: str,
    service: str,
    policy_names: tuple[str, ...],
    partition: pulumi.Input[str],
    parent: pulumi.Resource,
    *,
    tag_session: bool = False,
) -> aws.iam.Role:
    """A role for `service` with the AWS managed policies `policy_names` attached (a policy name may carry a
    path prefix such as 'service-role/')."""
    role = aws.iam.Role(
        name,
        assume_role_policy=assume_role_policy(service, tag_session=tag_session),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    for policy in policy_names:
        aws.iam.RolePolicyAttachment(
            f"{name}-{policy.rsplit('/', 1)[-1]}",
            role=role.name,
            policy_arn=pulumi.Output.concat("arn:", partition, ":iam::aws:policy/", policy),
            opts=pulumi.ResourceOptions(parent=role),
        )
    return role
