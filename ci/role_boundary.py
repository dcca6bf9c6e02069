"""The permissions boundary every role of the stacks carries: the most such a role may ever do, whatever policy a plan
attaches to it.

The deploy role may create customer managed policies under IAM_PATH with any content and attach them to the stacks'
roles (ci/deploy_policy.py): IAM has no condition key over a policy's document. What caps them is this boundary, so it
allows only the actions of the policies the program attaches (MANAGED_POLICY_ACTIONS, CUSTOMER_POLICY_ACTIONS; tests
keep both equal to what the program registers), secrets read only under SECRET_NAME_PREFIX in the account and
kms:Decrypt only as Secrets Manager decrypts such a secret, S3 objects only in the stacks' artifacts buckets of this
account (ARTIFACT_OBJECT_ACTIONS, ARTIFACT_BUCKET_ACTIONS) and, read-only, in the data buckets the account registers
by name (DATA_READ_ACTIONS), and never an IAM change (so a role cannot grant itself or another role more), another
role, or account or organization administration.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infra.autoscaler_access import AUTOSCALER_READS, AUTOSCALER_WRITES, NODE_GROUP_READ
from stack.names import ARTIFACTS_BUCKET_PREFIX, SECRET_NAME_PREFIX

# The actions each policy the program attaches allows, by the service or the exact actions; the boundary allows their
# union and nothing else. Services where one policy uses many actions and none of them can reach other identities or
# data are written whole; the others action by action. From the AWS managed policy reference (docs.aws.amazon.com/
# aws-managed-policy/latest/reference/<name>.html; when read: docs/versions.md):
MANAGED_POLICY_ACTIONS: dict[str, tuple[str, ...]] = {
    # pulumi-eks's cluster service role (nodejs/eks/cluster/cluster.ts). Autoscaling groups, EC2 (volumes, routes,
    # security groups, tags), the legacy cloud provider's load balancers and their service-linked role, and
    # kms:DescribeKey (EKS user guide, "Amazon EKS cluster IAM role": the minimal custom policy lists it).
    "AmazonEKSClusterPolicy": (
        "autoscaling:DescribeAutoScalingGroups",
        "autoscaling:UpdateAutoScalingGroup",
        "ec2:*",
        "elasticloadbalancing:*",
        "iam:CreateServiceLinkedRole",
        "kms:DescribeKey",
    ),
    # The node role (infra/iam.py NODE_POLICIES): EC2 reads, eks:DescribeCluster, eks-auth:AssumeRoleForPodIdentity.
    "AmazonEKSWorkerNodePolicy": ("ec2:*", "eks:DescribeCluster", "eks-auth:AssumeRoleForPodIdentity"),
    # Image pulls: GetAuthorizationToken, BatchGetImage, GetDownloadUrlForLayer and the pull-through cache's import.
    "AmazonEC2ContainerRegistryPullOnly": (
        "ecr:GetAuthorizationToken",
        "ecr:BatchGetImage",
        "ecr:GetDownloadUrlForLayer",
        "ecr:BatchImportUpstreamImage",
    ),
    # The SSM agent: its ssm:* calls (not SendCommand or parameters' writes), and its two message channels.
    "AmazonSSMManagedInstanceCore": (
        "ssm:DescribeAssociation",
        "ssm:GetDeployablePatchSnapshotForInstance",
        "ssm:GetDocument",
        "ssm:DescribeDocument",
        "ssm:GetManifest",
        "ssm:GetParameter",
        "ssm:GetParameters",
        "ssm:ListAssociations",
        "ssm:ListInstanceAssociations",
        "ssm:PutInventory",
        "ssm:PutComplianceItems",
        "ssm:PutConfigurePackageResult",
        "ssm:UpdateAssociationStatus",
        "ssm:UpdateInstanceAssociationStatus",
        "ssm:UpdateInstanceInformation",
        "ssmmessages:*",
        "ec2messages:*",
    ),
    # The VPC CNI's Pod Identity role (infra/addons.py): network interfaces and addresses.
    "AmazonEKS_CNI_Policy": ("ec2:*",),
    # The EBS CSI driver's Pod Identity role: volumes, snapshots, their tags.
    "service-role/AmazonEBSCSIDriverPolicy": ("ec2:*",),
    # The CloudWatch agent's Pod Identity role (workloads/platform, monitoring.cloudwatchObservability).
    "CloudWatchAgentServerPolicy": (
        "cloudwatch:PutMetricData",
        "ec2:DescribeVolumes",
        "ec2:DescribeTags",
        "logs:PutLogEvents",
        "logs:PutRetentionPolicy",
        "logs:DescribeLogStreams",
        "logs:DescribeLogGroups",
        "logs:CreateLogStream",
        "logs:CreateLogGroup",
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
        "xray:GetSamplingRules",
        "xray:GetSamplingTargets",
        "xray:GetSamplingStatisticSummaries",
        "ssm:GetParameter",
    ),
}
# Every AWS managed policy the program attaches to a role; a test keeps it equal to what the program registers.
ATTACHABLE_MANAGED_POLICIES = tuple(MANAGED_POLICY_ACTIONS)
# The customer managed policies the program writes (infra/hub_token_access.py: the job reads its one token secret;
# the job's artifacts and inputs in S3, issue 24). kms:Decrypt is allowed by the boundary only through Secrets Manager
# (DECRYPT_VIA). A test reads every customer managed policy the program registers and checks its actions are inside
# the boundary. Secrets Manager's read is a secret's whole value, and S3's a data set's or a model's, so both are
# bounded by name as well (secret_arns, artifact_bucket_arns, data_bucket_arns), not only by action: s3 on every
# bucket of the account would hand a hostile plan's policy under IAM_PATH every other team's data.
SECRET_ACTIONS: tuple[str, ...] = ("secretsmanager:GetSecretValue",)
# What the job does in its artifacts bucket under <prefix>/<stack>/ (checkpoints, the final model, the staged data):
# objects written in parts by s3torchconnector's CRT client, whose failed uploads are aborted
# (AbortMultipartUpload) and whose parts are listed on resume (ListMultipartUploadParts); old checkpoints deleted.
ARTIFACT_OBJECT_ACTIONS: tuple[str, ...] = (
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
)
ARTIFACT_BUCKET_ACTIONS: tuple[str, ...] = ("s3:ListBucket", "s3:GetBucketLocation")
# A data set, a base model or a checkpoint to resume from, in a bucket that is neither: read, never written.
DATA_READ_ACTIONS: tuple[str, ...] = ("s3:GetObject", "s3:ListBucket")
S3_ACTIONS = tuple(dict.fromkeys((*ARTIFACT_OBJECT_ACTIONS, *ARTIFACT_BUCKET_ACTIONS, *DATA_READ_ACTIONS)))
# The Cluster Autoscaler's (infra/autoscaler_access.py): reads of Auto Scaling groups, instance types and the node
# group, and the desired size and instance termination, which its policy scopes to the GPU group's Auto Scaling group;
# AmazonEKSClusterPolicy already allows UpdateAutoScalingGroup and every EC2 action on any.
AUTOSCALER_ACTIONS: tuple[str, ...] = (*AUTOSCALER_READS, NODE_GROUP_READ, *AUTOSCALER_WRITES)
CUSTOMER_POLICY_ACTIONS: tuple[str, ...] = (*SECRET_ACTIONS, *S3_ACTIONS, *AUTOSCALER_ACTIONS)
DECRYPT_VIA = "secretsmanager.*"  # kms:ViaService secretsmanager.<region>.<dns suffix>
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


def boundary_actions() -> list[str]:
    """Every action any policy the program attaches allows on any resource (the secrets' read, S3 and kms:Decrypt
    apart: secret_arns, artifact_bucket_arns, data_bucket_arns, DECRYPT_VIA)."""
    managed = {a for actions in MANAGED_POLICY_ACTIONS.values() for a in actions}
    return sorted((managed | set(CUSTOMER_POLICY_ACTIONS)) - set(SECRET_ACTIONS) - set(S3_ACTIONS))


def artifact_bucket_arns(partition: str = "aws") -> tuple[str, str]:
    """The stacks' artifacts buckets (named ARTIFACTS_BUCKET_PREFIX*) and their objects. An S3 ARN names no account,
    so the statements that use these also hold s3:ResourceAccount to the account."""
    bucket = f"arn:{partition}:s3:::{ARTIFACTS_BUCKET_PREFIX}*"
    return bucket, f"{bucket}/*"


def data_bucket_arns(buckets: Sequence[str], partition: str = "aws") -> list[str]:
    """The registered data buckets and their objects, by exact name: any account's bucket of that name (a public data
    set's or a partner's), read-only."""
    return [arn for name in buckets for arn in (f"arn:{partition}:s3:::{name}", f"arn:{partition}:s3:::{name}/*")]


def _s3_statements(account_id: str, partition: str, data_buckets: Sequence[str]) -> list[dict[str, Any]]:
    bucket, objects = artifact_bucket_arns(partition)
    this_account = {"StringEquals": {"s3:ResourceAccount": account_id}}
    statements: list[dict[str, Any]] = [
        {
            "Sid": "TheStacksArtifacts",
            "Effect": "Allow",
            "Action": list(ARTIFACT_OBJECT_ACTIONS),
            "Resource": objects,
            "Condition": this_account,
        },
        {
            "Sid": "TheStacksArtifactBuckets",
            "Effect": "Allow",
            "Action": list(ARTIFACT_BUCKET_ACTIONS),
            "Resource": bucket,
            "Condition": this_account,
        },
    ]
    if data_buckets:
        statements.append(
            {
                "Sid": "ReadOnlyTheRegisteredDataBuckets",
                "Effect": "Allow",
                "Action": list(DATA_READ_ACTIONS),
                "Resource": data_bucket_arns(data_buckets, partition),
            }
        )
    return statements


def secret_arns(account_id: str, partition: str = "aws") -> str:
    """Every secret of the account, in any region, whose name starts with SECRET_NAME_PREFIX. A secret's ARN is
    arn:PARTITION:secretsmanager:REGION:ACCOUNT:secret:NAME-XXXXXX (Secrets Manager API reference, CreateSecret), and
    a name holds no ':' (stack/hub_token_secret.py SECRET_NAME), so `*` after the prefix stays within the name."""
    return f"arn:{partition}:secretsmanager:*:{account_id}:secret:{SECRET_NAME_PREFIX}*"


def role_boundary(account_id: str, partition: str = "aws", data_buckets: Sequence[str] = ()) -> dict[str, Any]:
    """The most a role of the stack may ever do, whatever a policy under IAM_PATH says: the actions of the policies
    the program attaches; GetSecretValue only on the account's secrets named under SECRET_NAME_PREFIX, and kms:Decrypt
    only as Secrets Manager decrypts one of them; the job's S3 actions only on this account's buckets named
    ARTIFACTS_BUCKET_PREFIX*, and GetObject and ListBucket on `data_buckets` (python -m ci --data-bucket); never an
    IAM change (so a role cannot grant itself or another role more), another role, or account or organization
    administration. A service-linked role for the services the stack uses may still be created
    (AmazonEKSClusterPolicy creates the load balancers' one).

    Secrets Manager calls KMS with the encryption context SecretARN, the secret's ARN, on every call (Secrets Manager
    user guide, "Secret encryption and decryption in AWS Secrets Manager", Secrets Manager encryption context), so
    kms:EncryptionContext:SecretARN names the secret a Decrypt is for; the AWS managed policy
    AWSSecretsManagerClientReadOnlyAccess conditions its kms:Decrypt on the same key with StringLike (AWS managed
    policy reference). The key's ARN stays '*': which key encrypts a secret is its owner's choice."""
    secrets = secret_arns(account_id, partition)
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "WhatTheStacksPoliciesUse", "Effect": "Allow", "Action": boundary_actions(), "Resource": "*"},
            {"Sid": "ReadOnlyTheStacksSecrets", "Effect": "Allow", "Action": list(SECRET_ACTIONS), "Resource": secrets},
            *_s3_statements(account_id, partition, data_buckets),
            {
                "Sid": "DecryptOnlyTheStacksSecretsThroughSecretsManager",
                "Effect": "Allow",
                "Action": "kms:Decrypt",
                "Resource": "*",
                "Condition": {
                    "StringLike": {"kms:ViaService": DECRYPT_VIA, "kms:EncryptionContext:SecretARN": secrets}
                },
            },
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
