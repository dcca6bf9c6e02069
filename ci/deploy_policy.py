"""The deploy role's permissions (the boundary every role it creates must carry: ci/role_boundary.py).

`pulumi up` creates the VPC, the EKS cluster and node groups, ECR, FSx, a KMS key, a log group, and IAM roles and
customer managed policies for the cluster, its nodes, its add-ons and the job. The deploy role is what a hostile
branch would try to turn against the account once it reaches the approved `up`, so it is scoped to what the stacks
own:
- IAM: roles and customer managed policies only under IAM_PATH (stack/names.py), created only with the stack's tag,
  roles only with the boundary (condition key iam:PermissionsBoundary, which CreateRole,
  PutRolePermissionsBoundary, AttachRolePolicy and DetachRolePolicy support; AWS Service Authorization Reference,
  "Actions, resources, and condition keys for AWS Identity and Access Management", as parliament's bundled
  iam_definition.json records it). No inline policies at all (no iam:PutRolePolicy): the program writes none
  (infra/hub_token_access.py uses a customer managed policy), so the one way to give a role permissions is to attach
  one of ATTACHABLE_MANAGED_POLICIES or a policy under IAM_PATH, and every role is capped by the boundary. Roles
  may be passed only to EKS and EKS Pod Identity, not to EC2, so no instance can be launched with some other role.
- What IAM cannot hold: the trust policy of a role. No condition key exposes the AssumeRolePolicyDocument of
  iam:CreateRole or iam:UpdateAssumeRolePolicy (the reference lists only iam:PermissionsBoundary, aws:RequestTag and
  aws:TagKeys for CreateRole, none for UpdateAssumeRolePolicy), so the deploy role could create a role under
  IAM_PATH that another account may assume. What holds it is the policy pack's mandatory rule over every role's trust
  (policy/, run on the reviewed plan) and the rule that the approved plan is what runs (docs/ci.md). Such a role would
  still be capped by the boundary.
- KMS: keys created only with the stack's tag, managed and granted only when they carry it (aws:ResourceTag), grants
  only for AWS services (kms:GrantIsForAWSResource), deletion only with the full 30-day window, never bypassing the
  key policy lockout check; no Decrypt. Tagging on creation needs kms:TagResource in an IAM policy "that isn't
  restricted to particular KMS keys" (AWS KMS developer guide, "Controlling access to tags"), so TagResource is
  granted on every key of the account, with the stack's tag as its only key: a deploy session could add the stack's
  tag to another customer managed key whose key policy delegates to IAM and then manage that key. A key whose policy
  does not delegate to IAM is out of reach.
- EKS, ECR and CloudWatch Logs: only the stacks' clusters (named with Account.cluster_name_prefix), repositories
  (workloads/job/image_source.py) and control-plane log groups; the actions that support no resource (eks:CreateCluster,
  eks:ListClusters, ecr:GetAuthorizationToken, logs:DescribeLogGroups, ...) on "*" in statements of their own.
- S3: only the stacks' own artifacts buckets, named ARTIFACTS_BUCKET_PREFIX* (stack/names.py) in this account
  (s3:ResourceAccount): created, configured (versioning, default encryption, public access block, ownership
  controls, lifecycle, policy, tags) and read back as pulumi-aws reads them (BUCKET_READS). No s3:DeleteBucket: the
  program creates the bucket with retainOnDelete, so `pulumi destroy` drops it from the state and never deletes it,
  and neither can a hostile plan. No ACL writes (the bucket's ownership controls disable ACLs) and no object access
  at all, denied explicitly so that no bucket policy the role writes can grant it: the pods read and write objects
  through their own role, never the deploy role. What a bucket policy grants to others (another account) IAM cannot
  see, on any bucket so named, kept ones included (no condition key covers a policy's content): the policy pack
  refuses such a grant in the reviewed plan (policy/s3_grants.py), and in an account of an AWS Organization the
  resource control policy of ci/bucket_perimeter.py makes it inert. A stack that names an existing bucket
  (artifacts.bucket) needs nothing here: the program only reads the name it is given. The pods' policy on the bucket
  is a customer managed policy under IAM_PATH, created and attached by the IAM statements below like the token's.
- EC2 and FSx stay service-wide: a stack's VPC, subnets, gateways, security groups and launch templates are dozens of
  resource types whose ARNs are only known once created, and neither infra/network.py nor infra/lustre.py tags them
  with the stack's tag; the EC2 actions that reach into instances, disks and images the stacks do not own (user data,
  sharing snapshots and images, exports, Windows passwords) are denied instead.
- The boundary policy, the removal of a boundary and the CI roles themselves are out of reach (explicit denies).
The program puts every role and policy under IAM_PATH with the stack's tag, and the boundary on every role,
pulumi-eks's included, when the stack sets `fsdp-eks:cluster.rolePermissionsBoundary` (infra/iam_scope.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ci.role_boundary import ATTACHABLE_MANAGED_POLICIES, SERVICE_LINKED_ROLES
from infra.cluster import KEY_DELETION_WINDOW_DAYS, control_plane_log_group_name
from stack.names import ARTIFACTS_BUCKET_PREFIX, CLUSTER_NAME_PREFIX, IAM_PATH, STACK_TAG_KEY
from workloads.job.image_source import repository_name

PASS_ROLE_TO = ("eks.amazonaws.com", "pods.eks.amazonaws.com")
# EKS actions that support no resource-level permission (Service Authorization Reference, Amazon EKS: no resource
# type in their row): pulumi-aws and pulumi-eks call CreateCluster and DescribeAddonVersions (aws.eks.getAddonVersion).
EKS_ACCOUNT_ACTIONS = (
    "eks:CreateCluster",
    "eks:DescribeAddonVersions",
    "eks:DescribeAddonConfiguration",
    "eks:DescribeClusterVersions",
    "eks:ListClusters",
    "eks:ListAccessPolicies",
)
# The resource types under a cluster's name, each ARN "<type>/<cluster>/..." (the reference's resource types).
EKS_CLUSTER_RESOURCES = ("nodegroup", "addon", "access-entry", "podidentityassociation", "identityproviderconfig")
# EC2 actions that act on what the stacks do not own and give its data or its code away: rewriting an instance's
# user data (code run with its role on the next start), sharing or exporting disks and images to another account,
# reading a Windows administrator password. The program calls none of them (it creates no instance or image itself,
# the node groups' instances are launched by EKS's service-linked role, and it shares no disk).
EC2_REACH_INS = (
    "ec2:ModifyInstanceAttribute",
    "ec2:ModifySnapshotAttribute",
    "ec2:ModifyImageAttribute",
    "ec2:ModifyFpgaImageAttribute",
    "ec2:CreateInstanceExportTask",
    "ec2:ExportImage",
    "ec2:GetPasswordData",
)
KMS_KEY_ACTIONS = (
    "kms:DescribeKey",
    "kms:GetKeyPolicy",
    "kms:PutKeyPolicy",
    "kms:GetKeyRotationStatus",
    "kms:EnableKeyRotation",
    "kms:ListResourceTags",
    "kms:UntagResource",
    "kms:UpdateKeyDescription",
    "kms:ScheduleKeyDeletion",
)
IAM_READS = (
    "iam:GetRole",
    "iam:GetRolePolicy",
    "iam:ListRolePolicies",
    "iam:ListAttachedRolePolicies",
    "iam:ListInstanceProfilesForRole",
    "iam:ListRoleTags",
    "iam:GetPolicy",
    "iam:GetPolicyVersion",
    "iam:ListPolicyVersions",
    "iam:ListPolicyTags",
)
# On roles under IAM_PATH only, and only with the boundary.
BOUNDED_ROLE_WRITES = ("iam:PutRolePermissionsBoundary", "iam:AttachRolePolicy", "iam:DetachRolePolicy")
# On roles under IAM_PATH only. UpdateAssumeRolePolicy: a Pod Identity role's trust names its cluster's ARN, which an
# update may change in place; on the stack's own roles it gives nothing CreateRole does not (see the docstring).
STACK_ROLE_WRITES = (
    "iam:DeleteRole",
    "iam:UpdateRole",
    "iam:UpdateRoleDescription",
    "iam:UpdateAssumeRolePolicy",
    "iam:TagRole",
    "iam:UntagRole",
)
STACK_POLICY_WRITES = (
    "iam:CreatePolicyVersion",
    "iam:DeletePolicy",
    "iam:DeletePolicyVersion",
    "iam:SetDefaultPolicyVersion",
    "iam:TagPolicy",
    "iam:UntagPolicy",
)
BOUNDARY_POLICY_WRITES = STACK_POLICY_WRITES
# What `pulumi up` calls to create the artifacts bucket and its configuration resources (pulumi-aws 7's Bucket,
# BucketVersioning, BucketServerSideEncryptionConfiguration, BucketPublicAccessBlock, BucketOwnershipControls,
# BucketLifecycleConfiguration, BucketPolicy; their tags through PutBucketTagging, terraform-provider-aws
# internal/service/s3/tags.go bucketUpdateTags), as IAM actions (S3 API reference, each operation's "Permissions";
# Service Authorization Reference, Amazon S3). Delete*Configuration calls of these resources take the same Put
# permissions, which a retained bucket's resources never make.
# Tags: pulumi-aws 7.51.1's Bucket first sends them with CreateBucket and manages them with the S3 Control tagging
# API (s3:TagResource, s3:UntagResource, s3:ListTagsForResource: buckets' attribute-based access control), and falls
# back to PutBucketTagging / GetBucketTagging only where those are denied, a fallback that fails on an account with
# ABAC on for its buckets (pulumi_aws/s3/bucket.py, the Bucket's tags note). Both sets, so either path works.
BUCKET_WRITES = (
    "s3:CreateBucket",
    "s3:TagResource",
    "s3:UntagResource",
    "s3:PutBucketTagging",
    "s3:PutBucketVersioning",
    "s3:PutEncryptionConfiguration",
    "s3:PutBucketPublicAccessBlock",
    "s3:PutBucketOwnershipControls",
    "s3:PutLifecycleConfiguration",
    "s3:PutBucketPolicy",
)
# What pulumi-aws reads back after a create, on refresh and on every preview of an existing bucket: the Bucket's read
# fetches every sub-configuration the bucket once held inline (terraform-provider-aws internal/service/s3/bucket.go,
# resourceBucketRead: HeadBucket, which needs s3:ListBucket, then policy, ACL, CORS, website, versioning, accelerate,
# request payment, logging, lifecycle, replication, encryption, object lock and tags), and each configuration
# resource reads its own. s3:ListBucket also lists keys, not their content: the deploy role reads no object.
BUCKET_READS = (
    "s3:ListBucket",
    "s3:GetBucketLocation",
    "s3:GetBucketTagging",
    "s3:ListTagsForResource",
    "s3:GetBucketPolicy",
    "s3:GetBucketAcl",
    "s3:GetBucketCORS",
    "s3:GetBucketWebsite",
    "s3:GetBucketVersioning",
    "s3:GetAccelerateConfiguration",
    "s3:GetBucketRequestPayment",
    "s3:GetBucketLogging",
    "s3:GetLifecycleConfiguration",
    "s3:GetReplicationConfiguration",
    "s3:GetEncryptionConfiguration",
    "s3:GetBucketObjectLockConfiguration",
    "s3:GetBucketOwnershipControls",
    "s3:GetBucketPublicAccessBlock",
)


@dataclass(frozen=True)
class Account:
    """Where the roles live, the names a maintainer gives them once, and what the stacks' resources are named."""

    account_id: str
    partition: str = "aws"
    preview_role: str = "fsdp-eks-ci-preview"
    deploy_role: str = "fsdp-eks-ci-deploy"
    boundary_policy: str = "fsdp-eks-role-boundary"  # not under IAM_PATH: out of the deploy role's policy grants
    # Every cluster the deploy role creates is named with this prefix: the default name is fsdp-eks-<stack>
    # (stack/config.py cluster_name), and preview refuses a CI-deployed stack's cluster.name without it
    # (stack/cluster_checks.py deploy_role_cluster_name_problems).
    cluster_name_prefix: str = CLUSTER_NAME_PREFIX
    # Clusters the stacks use but do not create (cluster.existing), granted by their own names: the job's Pod
    # Identity association and the platform's add-on reads need them.
    existing_clusters: tuple[str, ...] = ()
    # The stacks' own artifacts buckets are named with this prefix (stack/names.py artifacts_bucket_prefix).
    artifacts_bucket_prefix: str = ARTIFACTS_BUCKET_PREFIX
    # Buckets the account's data sets live in (job.dataset, job.model, job.resumeFrom outside the stacks' buckets),
    # granted by name, read-only, to the stacks' roles through the boundary (ci/role_boundary.py).
    data_buckets: tuple[str, ...] = ()

    def arn(self, kind: str, name: str) -> str:
        return f"arn:{self.partition}:iam::{self.account_id}:{kind}/{name}"

    def regional_arn(self, service: str, resource: str) -> str:
        """An ARN of this account in any region."""
        return f"arn:{self.partition}:{service}:*:{self.account_id}:{resource}"

    @property
    def boundary_arn(self) -> str:
        return self.arn("policy", self.boundary_policy)

    @property
    def ci_role_arns(self) -> list[str]:
        return [self.arn("role", self.preview_role), self.arn("role", self.deploy_role)]

    @property
    def stack_roles(self) -> str:
        return self.arn("role", f"{IAM_PATH.strip('/')}/*")

    @property
    def stack_policies(self) -> str:
        return self.arn("policy", f"{IAM_PATH.strip('/')}/*")

    @property
    def stack_clusters(self) -> list[str]:
        """The stacks' clusters and everything EKS names under a cluster."""
        return [
            arn
            for clusters in (f"{self.cluster_name_prefix}*", *self.existing_clusters)
            for arn in (
                self.regional_arn("eks", f"cluster/{clusters}"),
                *(self.regional_arn("eks", f"{kind}/{clusters}/*") for kind in EKS_CLUSTER_RESOURCES),
            )
        ]

    @property
    def stack_repositories(self) -> str:
        return self.regional_arn("ecr", f"repository/{repository_name('*')}")

    @property
    def stack_log_groups(self) -> list[str]:
        """The control-plane log groups, as the group and as its streams (logs actions name either form)."""
        group = self.regional_arn("logs", f"log-group:{control_plane_log_group_name(f'{self.cluster_name_prefix}*')}")
        return [group, f"{group}:*"]

    @property
    def stack_buckets(self) -> str:
        """Every bucket named like a stack's artifacts bucket (an S3 ARN holds no account: s3:ResourceAccount
        pins the account in the statements that use it)."""
        return f"arn:{self.partition}:s3:::{self.artifacts_bucket_prefix}*"

    def managed_policy_arn(self, name: str) -> str:
        return f"arn:{self.partition}:iam::aws:policy/{name}"


def _has_stack_tag(key: str) -> dict[str, dict[str, str]]:
    """A condition that the tag STACK_TAG_KEY is in `key`'s place (aws:RequestTag or aws:ResourceTag)."""
    return {"Null": {f"{key}/{STACK_TAG_KEY}": "false"}}


def _iam_statements(account: Account) -> list[dict[str, Any]]:
    boundary = {"iam:PermissionsBoundary": account.boundary_arn}  # an ARN-typed key (parliament's reference)
    return [
        {
            "Sid": "ReadTheStacksRolesAndPolicies",
            "Effect": "Allow",
            "Action": list(IAM_READS),
            "Resource": [account.stack_roles, account.stack_policies],
        },
        {
            "Sid": "CreateStackRolesWithTheBoundaryAndTag",
            "Effect": "Allow",
            "Action": "iam:CreateRole",
            "Resource": account.stack_roles,
            "Condition": {"ArnEquals": boundary, **_has_stack_tag("aws:RequestTag")},
        },
        {
            "Sid": "ChangeStackRolesKeepingTheBoundary",
            "Effect": "Allow",
            "Action": list(BOUNDED_ROLE_WRITES),
            "Resource": account.stack_roles,
            "Condition": {"ArnEquals": boundary},
        },
        {"Sid": "StackRoles", "Effect": "Allow", "Action": list(STACK_ROLE_WRITES), "Resource": account.stack_roles},
        {
            "Sid": "PassStackRolesOnlyToEks",
            "Effect": "Allow",
            "Action": "iam:PassRole",
            "Resource": account.stack_roles,
            "Condition": {"StringEquals": {"iam:PassedToService": list(PASS_ROLE_TO)}},
        },
        {
            "Sid": "CreateStackPoliciesWithTheTag",
            "Effect": "Allow",
            "Action": "iam:CreatePolicy",
            "Resource": account.stack_policies,
            "Condition": _has_stack_tag("aws:RequestTag"),
        },
        {
            "Sid": "StackPolicies",
            "Effect": "Allow",
            "Action": list(STACK_POLICY_WRITES),
            "Resource": account.stack_policies,
        },
        {
            "Sid": "ServiceLinkedRoles",
            "Effect": "Allow",
            "Action": "iam:CreateServiceLinkedRole",
            # Service-linked roles live under the path aws-service-role/ (IAM User Guide, "Service-linked roles").
            "Resource": account.arn("role", "aws-service-role/*"),
            "Condition": {"StringEquals": {"iam:AWSServiceName": list(SERVICE_LINKED_ROLES)}},
        },
        {
            "Sid": "AttachOnlyTheProgramsPolicies",
            "Effect": "Deny",
            "Action": ["iam:AttachRolePolicy", "iam:DetachRolePolicy"],
            "Resource": "*",
            "Condition": {
                "ArnNotLike": {
                    "iam:PolicyARN": [
                        *(account.managed_policy_arn(p) for p in ATTACHABLE_MANAGED_POLICIES),
                        account.stack_policies,
                    ]
                }
            },
        },
        {"Sid": "KeepTheBoundary", "Effect": "Deny", "Action": "iam:DeleteRolePermissionsBoundary", "Resource": "*"},
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
    ]


def _kms_statements(account: Account) -> list[dict[str, Any]]:
    keys = account.regional_arn("kms", "key/*")
    return [
        {
            "Sid": "CreateKeysWithTheStackTag",
            "Effect": "Allow",
            "Action": "kms:CreateKey",
            "Resource": "*",
            "Condition": _has_stack_tag("aws:RequestTag"),
        },
        {
            # Tags on creation need TagResource on every key (the docstring); only the stack's tag may be set.
            "Sid": "TagKeysWithTheStackTagOnly",
            "Effect": "Allow",
            "Action": "kms:TagResource",
            "Resource": "*",
            "Condition": {
                **_has_stack_tag("aws:RequestTag"),
                "ForAllValues:StringEquals": {"aws:TagKeys": [STACK_TAG_KEY]},
            },
        },
        {
            "Sid": "ManageTheStacksKeys",
            "Effect": "Allow",
            "Action": list(KMS_KEY_ACTIONS),
            "Resource": keys,
            "Condition": _has_stack_tag("aws:ResourceTag"),
        },
        {
            # EKS creates a grant on the cluster's key with the creator's permissions (forward access session).
            "Sid": "GrantTheStacksKeysToAwsServicesOnly",
            "Effect": "Allow",
            "Action": "kms:CreateGrant",
            "Resource": keys,
            "Condition": {**_has_stack_tag("aws:ResourceTag"), "Bool": {"kms:GrantIsForAWSResource": "true"}},
        },
        {
            # The program's window (infra/cluster.py): a deletion, even of a key that got the tag, stays cancellable.
            "Sid": "DeleteKeysOnlyWithTheFullWindow",
            "Effect": "Deny",
            "Action": "kms:ScheduleKeyDeletion",
            "Resource": "*",
            "Condition": {
                "NumericLessThan": {"kms:ScheduleKeyDeletionPendingWindowInDays": str(KEY_DELETION_WINDOW_DAYS)}
            },
        },
        {
            "Sid": "NeverBypassTheKeyPolicyLockoutCheck",
            "Effect": "Deny",
            "Action": ["kms:CreateKey", "kms:PutKeyPolicy"],
            "Resource": "*",
            "Condition": {"Bool": {"kms:BypassPolicyLockoutSafetyCheck": "true"}},
        },
    ]


def in_this_account(account: Account) -> dict[str, dict[str, str]]:
    """A condition that the bucket an S3 request acts on belongs to this account: a bucket's ARN has no account field,
    so without it `fsdp-eks-*` would match buckets so named in any account."""
    return {"StringEquals": {"s3:ResourceAccount": account.account_id}}


def _s3_statements(account: Account) -> list[dict[str, Any]]:
    return [
        {
            "Sid": "CreateAndConfigureTheStacksBuckets",
            "Effect": "Allow",
            "Action": list(BUCKET_WRITES),
            "Resource": account.stack_buckets,
            "Condition": in_this_account(account),
        },
        {
            "Sid": "ReadTheStacksBuckets",
            "Effect": "Allow",
            "Action": list(BUCKET_READS),
            "Resource": account.stack_buckets,
            "Condition": in_this_account(account),
        },
        {
            # PutBucketPolicy could write a bucket policy that lets this role itself read or replace the model; in
            # the same account a bucket policy's Allow is enough on its own, but an explicit Deny in the identity
            # policy wins over it (IAM User Guide, "Policy evaluation logic"). Object ARNs only: the bucket's own
            # configuration is authorised against the bucket's ARN, which holds no '/'.
            "Sid": "NoObjectAccessEvenThroughABucketPolicy",
            "Effect": "Deny",
            "Action": "s3:*",
            "Resource": f"arn:{account.partition}:s3:::*/*",
        },
    ]


def deploy_policy(account: Account) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "NetworkAndNodes", "Effect": "Allow", "Action": "ec2:*", "Resource": "*"},
            {"Sid": "NotIntoOtherInstancesOrImages", "Effect": "Deny", "Action": list(EC2_REACH_INS), "Resource": "*"},
            {"Sid": "CheckpointFileSystems", "Effect": "Allow", "Action": "fsx:*", "Resource": "*"},
            {"Sid": "TheStacksClusters", "Effect": "Allow", "Action": "eks:*", "Resource": account.stack_clusters},
            {"Sid": "EksWithoutResources", "Effect": "Allow", "Action": list(EKS_ACCOUNT_ACTIONS), "Resource": "*"},
            {
                "Sid": "TheStacksRepositories",
                "Effect": "Allow",
                "Action": "ecr:*",
                "Resource": account.stack_repositories,
            },
            # GetAuthorizationToken supports no resource (the reference); the deploy job's `docker login` calls it.
            {"Sid": "RegistryLogin", "Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
            {"Sid": "TheStacksLogGroups", "Effect": "Allow", "Action": "logs:*", "Resource": account.stack_log_groups},
            {"Sid": "ListLogGroups", "Effect": "Allow", "Action": "logs:DescribeLogGroups", "Resource": "*"},
            # The update runs the program's data sources as its preview did: the GPU nodes' price from AWS's public
            # price list (infra/prices.py; GetProducts supports no resource, Service Authorization Reference).
            {"Sid": "PublicPriceList", "Effect": "Allow", "Action": "pricing:GetProducts", "Resource": "*"},
            {
                "Sid": "EksAmiParameters",
                "Effect": "Allow",
                "Action": "ssm:GetParameter",
                # AWS's public parameters have no account in their ARN (arn:aws:ssm:REGION::parameter/aws/...); `*`
                # matches that empty field, and no account's own parameter can be under /aws/ (Systems Manager user
                # guide, "Creating Parameter Store parameters": a name can't be prefixed with "aws" or "ssm").
                "Resource": f"arn:{account.partition}:ssm:*:*:parameter/aws/service/eks/*",
            },
            *_s3_statements(account),
            *_kms_statements(account),
            *_iam_statements(account),
        ],
    }
