"""AutoscalerAccess: what the Cluster Autoscaler may do in AWS, through an EKS Pod Identity role of its service account.

Its reads (Auto Scaling groups and instances, launch templates, instance types, the GPU node group's labels, taints
and node-template tags) on every resource, and its two writes, the desired size and the termination of an instance,
on the GPU node group's Auto Scaling group alone: kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/README.md
("Full Cluster Autoscaler Features Policy" for the reads, "Minimal IAM Permissions Policy" for the writes scoped by the
group's ARN). A customer managed policy, like every other of the stack (no inline policy: ci/deploy_policy.py), under
IAM_PATH with the stack's tag (infra/iam_scope.py); the permissions boundary allows exactly these actions
(ci/role_boundary.py AUTOSCALER_ACTIONS).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.hub_token_access import AccountFacts, stack_tags
from infra.iam import PodIdentity, cluster_arn, pod_identity_trust_policy
from stack.names import IAM_PATH

TYPE = "fsdp-eks:infra:AutoscalerAccess"
AUTOSCALER_READS = (
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLaunchConfigurations",
    "autoscaling:DescribeScalingActivities",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplateVersions",
    "ec2:GetInstanceTypesFromInstanceRequirements",
)
NODE_GROUP_READ = "eks:DescribeNodegroup"
AUTOSCALER_WRITES = ("autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup")


def autoscaling_group_arn(facts: AccountFacts, group: str) -> str:
    """An Auto Scaling group's ARN by its name, any group id (Amazon EC2 Auto Scaling user guide, "Control access to
    Auto Scaling groups": arn:PARTITION:autoscaling:REGION:ACCOUNT:autoScalingGroup:UUID:autoScalingGroupName/NAME)."""
    groups = f"arn:{facts.partition}:autoscaling:{facts.region}:{facts.account}:autoScalingGroup"
    return f"{groups}:*:autoScalingGroupName/{group}"


def autoscaler_policy(facts: AccountFacts, cluster_name: str, group: str) -> str:
    """The autoscaler's reads, the node groups of this cluster, and its writes on `group` (an Auto Scaling group's
    name) only."""
    node_groups = f"arn:{facts.partition}:eks:{facts.region}:{facts.account}:nodegroup/{cluster_name}/*"
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "ReadGroupsAndInstanceTypes",
                    "Effect": "Allow",
                    "Action": list(AUTOSCALER_READS),
                    "Resource": "*",
                },
                {
                    "Sid": "ReadTheClustersNodeGroups",
                    "Effect": "Allow",
                    "Action": NODE_GROUP_READ,
                    "Resource": node_groups,
                },
                {
                    "Sid": "ScaleTheGpuGroupOnly",
                    "Effect": "Allow",
                    "Action": list(AUTOSCALER_WRITES),
                    "Resource": autoscaling_group_arn(facts, group),
                },
            ],
        }
    )


@dataclass(frozen=True)
class AutoscalerAccessArgs:
    identity: PodIdentity  # the autoscaler's namespace and service account
    cluster_name: str
    region: str
    stack: str
    autoscaling_group: pulumi.Input[str]  # the GPU node group's Auto Scaling group
    depends_on: Sequence[pulumi.Resource] = ()  # the cluster and its Pod Identity agent


class AutoscalerAccess(pulumi.ComponentResource):
    """The autoscaler's role, its policy and attachment, and its service account's Pod Identity association."""

    association: aws.eks.PodIdentityAssociation

    def __init__(self, name: str, args: AutoscalerAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        invoke = pulumi.InvokeOutputOptions(parent=self)
        partition = aws.get_partition_output(opts=invoke)
        account = aws.get_caller_identity_output(opts=invoke).account_id
        facts = pulumi.Output.all(partition.partition, partition.dns_suffix, account).apply(
            lambda v: AccountFacts(partition=v[0], dns_suffix=v[1], region=args.region, account=v[2])
        )
        tags, child = stack_tags(args.stack), pulumi.ResourceOptions(parent=self)
        trust = facts.apply(
            lambda f: pod_identity_trust_policy(
                args.identity, cluster_arn(f.partition, f.region, f.account, args.cluster_name)
            )
        )
        role = aws.iam.Role(f"{name}-role", path=IAM_PATH, assume_role_policy=trust, tags=tags, opts=child)
        policy = aws.iam.Policy(
            f"{name}-policy",
            path=IAM_PATH,
            description="Scale the GPU node group between its bounds (Cluster Autoscaler)",
            policy=pulumi.Output.all(facts, args.autoscaling_group).apply(
                lambda v: autoscaler_policy(v[0], args.cluster_name, v[1])
            ),
            tags=tags,
            opts=child,
        )
        attachment = aws.iam.RolePolicyAttachment(
            f"{name}-attachment", role=role.name, policy_arn=policy.arn, opts=child
        )
        # The autoscaler acts with the role from its first start: the association, with the policy attached, comes
        # before the chart (the platform depends on this component) and goes after it.
        self.association = aws.eks.PodIdentityAssociation(
            f"{name}-association",
            cluster_name=args.cluster_name,
            namespace=args.identity.namespace,
            service_account=args.identity.service_account,
            role_arn=role.arn,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[attachment, *args.depends_on]),
        )
        self.register_outputs({"roleArn": role.arn})
