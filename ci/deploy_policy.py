"""The deploy role's permissions, and the permissions boundary every role it creates must carry.

`pulumi up` creates the VPC, the EKS cluster and node groups, ECR, FSx, a KMS key, log groups, and IAM roles for the
cluster, its nodes and its add-ons. Creating IAM roles is what turns a deploy role into an administrator, so:
- a role may be created only with the boundary below (condition key iam:PermissionsBoundary, which CreateRole,
  PutRolePermissionsBoundary, AttachRolePolicy, DetachRolePolicy, PutRolePolicy and DeleteRolePolicy support:
  AWS Service Authorization Reference, "Actions, resources, and condition keys for AWS Identity and Access
  Management"); policies may be attached or written only on roles that carry it;
- only the AWS managed policies the program attaches may be attached (condition key iam:PolicyARN);
- roles may be passed only to EKS (the cluster and node group roles) and to EKS Pod Identity (condition key
  iam:PassedToService), not to EC2, so no instance can be launched with some other role of the account;
- the boundary policy, the removal of a boundary and the CI roles themselves are out of reach (explicit denies).
The program attaches the boundary to every role, pulumi-eks's included, when the stack sets
`fsdp-eks:cluster.rolePermissionsBoundary` (infra/role_boundary.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Every AWS managed policy the program attaches to a role (a test keeps this equal to or above what the program
# registers): node role, EBS CSI and CloudWatch agent Pod Identity roles, and pulumi-eks's cluster service role.
ATTACHABLE_MANAGED_POLICIES = (
    "AmazonEKSClusterPolicy",
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryReadOnly",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
    "service-role/AmazonEBSCSIDriverPolicy",
    "CloudWatchAgentServerPolicy",
)
PASS_ROLE_TO = ("eks.amazonaws.com", "pods.eks.amazonaws.com")
# Service-linked roles a first EKS, node group, autoscaling or FSx deployment in an account creates.
SERVICE_LINKED_ROLES = (
    "eks.amazonaws.com",
    "eks-nodegroup.amazonaws.com",
    "autoscaling.amazonaws.com",
    "fsx.amazonaws.com",
    "spot.amazonaws.com",
)
# Every IAM action that changes something, by verb (IAM's actions are named verb-first).
IAM_WRITES = tuple(
    f"iam:{verb}*"
    for verb in (
        "Add",
        "Attach",
        "Change",
        "Create",
        "Deactivate",
        "Delete",
        "Detach",
        "Enable",
        "Pass",
        "Put",
        "Remove",
        "Reset",
        "Resync",
        "Set",
        "Tag",
        "Untag",
        "Update",
        "Upload",
    )
)
BOUNDED_SERVICE_LINKED_ROLES = ("elasticloadbalancing.amazonaws.com", *SERVICE_LINKED_ROLES)
# Whole services the stack manages; none of them can grant IAM permissions.
PROVISIONED_SERVICES = ("ec2:*", "eks:*", "ecr:*", "fsx:*", "logs:*")
# KMS: create and manage the cluster's envelope-encryption key and let EKS use it (CreateGrant); no Decrypt.
KMS_ACTIONS = (
    "kms:CreateKey",
    "kms:DescribeKey",
    "kms:GetKeyPolicy",
    "kms:PutKeyPolicy",
    "kms:GetKeyRotationStatus",
    "kms:EnableKeyRotation",
    "kms:ListResourceTags",
    "kms:TagResource",
    "kms:UntagResource",
    "kms:ScheduleKeyDeletion",
    "kms:CreateGrant",
    "kms:ListAliases",
    "kms:CreateAlias",
    "kms:DeleteAlias",
)
ROLE_READS = (
    "iam:GetRole",
    "iam:GetRolePolicy",
    "iam:ListRolePolicies",
    "iam:ListAttachedRolePolicies",
    "iam:ListInstanceProfilesForRole",
    "iam:GetPolicy",
    "iam:GetPolicyVersion",
    "iam:GetOpenIDConnectProvider",
    "iam:ListOpenIDConnectProviders",
)
# Need the boundary on the role they act on.
BOUNDED_ROLE_WRITES = (
    "iam:CreateRole",
    "iam:PutRolePermissionsBoundary",
    "iam:AttachRolePolicy",
    "iam:DetachRolePolicy",
    "iam:PutRolePolicy",
    "iam:DeleteRolePolicy",
)
# Role changes IAM cannot tie to the boundary by condition; limited to what replacing and deleting roles needs.
# iam:UpdateAssumeRolePolicy is not among them: rewriting the trust of an existing role of the account would let
# the deploy role make that role trust it.
UNBOUNDED_ROLE_WRITES = (
    "iam:DeleteRole",
    "iam:UpdateRole",
    "iam:UpdateRoleDescription",
    "iam:TagRole",
    "iam:UntagRole",
)
OIDC_PROVIDER_WRITES = (
    "iam:CreateOpenIDConnectProvider",
    "iam:DeleteOpenIDConnectProvider",
    "iam:TagOpenIDConnectProvider",
    "iam:UntagOpenIDConnectProvider",
    "iam:UpdateOpenIDConnectProviderThumbprint",
)
BOUNDARY_POLICY_WRITES = (
    "iam:CreatePolicyVersion",
    "iam:DeletePolicy",
    "iam:DeletePolicyVersion",
    "iam:SetDefaultPolicyVersion",
    "iam:TagPolicy",
    "iam:UntagPolicy",
)


@dataclass(frozen=True)
class Account:
    """Where the roles live, and the names a maintainer gives them once."""

    account_id: str
    partition: str = "aws"
    preview_role: str = "fsdp-eks-ci-preview"
    deploy_role: str = "fsdp-eks-ci-deploy"
    boundary_policy: str = "fsdp-eks-role-boundary"

    def arn(self, kind: str, name: str) -> str:
        return f"arn:{self.partition}:iam::{self.account_id}:{kind}/{name}"

    @property
    def boundary_arn(self) -> str:
        return self.arn("policy", self.boundary_policy)

    @property
    def ci_role_arns(self) -> list[str]:
        return [self.arn("role", self.preview_role), self.arn("role", self.deploy_role)]

    def managed_policy_arn(self, name: str) -> str:
        return f"arn:{self.partition}:iam::aws:policy/{name}"


def deploy_policy(account: Account) -> dict[str, Any]:
    roles = account.arn("role", "*")
    boundary = {"StringEquals": {"iam:PermissionsBoundary": account.boundary_arn}}
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "ProvisionTheStack", "Effect": "Allow", "Action": list(PROVISIONED_SERVICES), "Resource": "*"},
            {"Sid": "TheClusterKey", "Effect": "Allow", "Action": list(KMS_ACTIONS), "Resource": "*"},
            {
                "Sid": "EksAmiParameters",
                "Effect": "Allow",
                "Action": "ssm:GetParameter",
                "Resource": f"arn:{account.partition}:ssm:*::parameter/aws/service/eks/*",
            },
            {"Sid": "ReadRoles", "Effect": "Allow", "Action": list(ROLE_READS), "Resource": "*"},
            {
                "Sid": "RolesOnlyUnderTheBoundary",
                "Effect": "Allow",
                "Action": list(BOUNDED_ROLE_WRITES),
                "Resource": roles,
                "Condition": boundary,
            },
            {
                "Sid": "ReplaceAndDeleteRoles",
                "Effect": "Allow",
                "Action": list(UNBOUNDED_ROLE_WRITES),
                "Resource": roles,
            },
            {
                "Sid": "PassRolesOnlyToEks",
                "Effect": "Allow",
                "Action": "iam:PassRole",
                "Resource": roles,
                "Condition": {"StringEquals": {"iam:PassedToService": list(PASS_ROLE_TO)}},
            },
            {
                "Sid": "ServiceLinkedRoles",
                "Effect": "Allow",
                "Action": "iam:CreateServiceLinkedRole",
                "Resource": "*",
                "Condition": {"StringEquals": {"iam:AWSServiceName": list(SERVICE_LINKED_ROLES)}},
            },
            {
                "Sid": "ClusterOidcProvider",
                "Effect": "Allow",
                "Action": list(OIDC_PROVIDER_WRITES),
                "Resource": account.arn("oidc-provider", "oidc.eks.*.amazonaws.com/id/*"),
            },
            {
                "Sid": "AttachOnlyTheProgramsPolicies",
                "Effect": "Deny",
                "Action": ["iam:AttachRolePolicy", "iam:DetachRolePolicy"],
                "Resource": "*",
                "Condition": {
                    "ArnNotEquals": {
                        "iam:PolicyARN": [account.managed_policy_arn(p) for p in ATTACHABLE_MANAGED_POLICIES]
                    }
                },
            },
            {
                "Sid": "KeepTheBoundary",
                "Effect": "Deny",
                "Action": "iam:DeleteRolePermissionsBoundary",
                "Resource": "*",
            },
            {
                "Sid": "LeaveTheBoundaryPolicyAlone",
                "Effect": "Deny",
                "Action": list(BOUNDARY_POLICY_WRITES),
                "Resource": account.boundary_arn,
            },
            {
                "Sid": "LeaveTheCiRolesAlone",
                "Effect": "Deny",
                "NotAction": ["iam:Get*", "iam:List*"],
                "Resource": account.ci_role_arns,
            },
        ],
    }


def role_boundary(account: Account) -> dict[str, Any]:
    """The most a role of the stack may ever do: what its attached policies allow, except changing IAM (so it cannot
    grant itself or another role more), assuming other roles, and account or organization administration. A
    service-linked role for the services the stack uses may still be created (AmazonEKSClusterPolicy creates the
    load balancers' one)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "UpToTheAttachedPolicies", "Effect": "Allow", "Action": "*", "Resource": "*"},
            {
                "Sid": "NoIamChanges",
                "Effect": "Deny",
                "Action": list(IAM_WRITES),
                "Resource": "*",
                # A missing key makes a negated operator true: every IAM write but these service-linked roles.
                "Condition": {"StringNotEquals": {"iam:AWSServiceName": list(BOUNDED_SERVICE_LINKED_ROLES)}},
            },
            {
                "Sid": "NoOtherRolesOrAccountAdministration",
                "Effect": "Deny",
                "Action": ["sts:AssumeRole", "organizations:*", "account:*"],
                "Resource": "*",
            },
        ],
    }
