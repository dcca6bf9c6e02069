"""The deploy role's policy and the permissions boundary, asked concrete questions (tests/ci/iam_eval.py): what an
approved `pulumi up` may do, and what a hostile plan reaching that `up` still may not."""

from __future__ import annotations

import json

import pytest

from ci.deploy_policy import EC2_REACH_INS, Account, deploy_policy
from ci.role_boundary import MANAGED_POLICY_ACTIONS, role_boundary
from infra.cluster import control_plane_log_group_name
from stack.files import load_stack_config, stack_names
from stack.hub_token_secret import DOCUMENTED_NAME
from stack.names import STACK_TAG_KEY
from tests.ci.iam_eval import allowed
from workloads.job.image_source import repository_name

ACCOUNT = Account("123456789012")
DEPLOY, BOUNDARY = deploy_policy(ACCOUNT), role_boundary(ACCOUNT.account_id, ACCOUNT.partition)
STACK_ROLE = ACCOUNT.arn("role", "fsdp-eks/cluster-node-4f2a9c1")
OTHER_ROLE = ACCOUNT.arn("role", "payments-admin")
STACK_POLICY = ACCOUNT.arn("policy", "fsdp-eks/job-hub-token-read-1a2b3c")
ADMIN = "arn:aws:iam::aws:policy/AdministratorAccess"
NODE_POLICY = ACCOUNT.managed_policy_arn("AmazonEKSWorkerNodePolicy")
BOUNDED = {"iam:PermissionsBoundary": ACCOUNT.boundary_arn}
TAGGED = {f"aws:RequestTag/{STACK_TAG_KEY}": "p5-16"}
KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
KEY_OF_THE_STACK = {f"aws:ResourceTag/{STACK_TAG_KEY}": "p5-16"}


# --- roles and policies ---------------------------------------------------------------------------------------


def test_roles_are_created_only_under_the_path_with_the_boundary_and_the_stack_tag() -> None:
    assert allowed(DEPLOY, "iam:CreateRole", STACK_ROLE, {**BOUNDED, **TAGGED})
    assert not allowed(DEPLOY, "iam:CreateRole", STACK_ROLE, BOUNDED)
    assert not allowed(DEPLOY, "iam:CreateRole", STACK_ROLE, TAGGED)
    assert not allowed(DEPLOY, "iam:CreateRole", STACK_ROLE, {"iam:PermissionsBoundary": ADMIN, **TAGGED})
    assert not allowed(DEPLOY, "iam:CreateRole", OTHER_ROLE, {**BOUNDED, **TAGGED})


def test_the_boundary_cannot_be_swapped_or_removed() -> None:
    assert allowed(DEPLOY, "iam:PutRolePermissionsBoundary", STACK_ROLE, BOUNDED)
    assert not allowed(DEPLOY, "iam:PutRolePermissionsBoundary", STACK_ROLE, {"iam:PermissionsBoundary": ADMIN})
    assert not allowed(DEPLOY, "iam:DeleteRolePermissionsBoundary", STACK_ROLE, BOUNDED)


def test_no_inline_policy_can_be_written_or_removed() -> None:
    granted = json.dumps([s["Action"] for s in DEPLOY["Statement"] if s["Effect"] == "Allow"])
    assert "PutRolePolicy" not in granted and "DeleteRolePolicy" not in granted
    for action in ("iam:PutRolePolicy", "iam:DeleteRolePolicy"):
        assert not allowed(DEPLOY, action, STACK_ROLE, BOUNDED)


@pytest.mark.parametrize("policy", [NODE_POLICY, STACK_POLICY])
def test_the_programs_policies_attach_to_the_stacks_bounded_roles(policy: str) -> None:
    assert allowed(DEPLOY, "iam:AttachRolePolicy", STACK_ROLE, {**BOUNDED, "iam:PolicyARN": policy})
    assert allowed(DEPLOY, "iam:DetachRolePolicy", STACK_ROLE, {**BOUNDED, "iam:PolicyARN": policy})
    assert not allowed(DEPLOY, "iam:AttachRolePolicy", STACK_ROLE, {"iam:PolicyARN": policy})
    assert not allowed(DEPLOY, "iam:AttachRolePolicy", OTHER_ROLE, {**BOUNDED, "iam:PolicyARN": policy})


@pytest.mark.parametrize(
    "policy",
    [ADMIN, "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly", ACCOUNT.arn("policy", "team/broad")],
)
def test_no_other_policy_can_be_attached(policy: str) -> None:
    assert not allowed(DEPLOY, "iam:AttachRolePolicy", STACK_ROLE, {**BOUNDED, "iam:PolicyARN": policy})


def test_customer_managed_policies_only_under_the_path_with_the_stack_tag() -> None:
    assert allowed(DEPLOY, "iam:CreatePolicy", STACK_POLICY, TAGGED)
    assert not allowed(DEPLOY, "iam:CreatePolicy", STACK_POLICY)
    assert not allowed(DEPLOY, "iam:CreatePolicy", ACCOUNT.arn("policy", "broad"), TAGGED)
    for action in ("iam:CreatePolicyVersion", "iam:DeletePolicy", "iam:DeletePolicyVersion"):
        assert allowed(DEPLOY, action, STACK_POLICY), action
        assert not allowed(DEPLOY, action, ACCOUNT.arn("policy", "team/broad")), action


@pytest.mark.parametrize(
    "service,expected",
    [
        ("eks.amazonaws.com", True),
        ("pods.eks.amazonaws.com", True),
        ("ec2.amazonaws.com", False),
        ("lambda.amazonaws.com", False),
    ],
)
def test_the_stacks_roles_are_passed_only_to_eks(service: str, expected: bool) -> None:
    assert allowed(DEPLOY, "iam:PassRole", STACK_ROLE, {"iam:PassedToService": service}) is expected
    assert not allowed(DEPLOY, "iam:PassRole", OTHER_ROLE, {"iam:PassedToService": service})


@pytest.mark.parametrize("action", ["iam:UpdateAssumeRolePolicy", "iam:DeleteRole", "iam:TagRole", "iam:UpdateRole"])
def test_role_lifecycle_reaches_the_stacks_roles_only(action: str) -> None:
    assert allowed(DEPLOY, action, STACK_ROLE)
    assert not allowed(DEPLOY, action, OTHER_ROLE)


@pytest.mark.parametrize(
    "action",
    [
        "iam:CreateUser",
        "iam:CreateAccessKey",
        "iam:CreateInstanceProfile",
        "iam:AddRoleToInstanceProfile",
        "iam:CreateOpenIDConnectProvider",
        "iam:CreateSAMLProvider",
        "sts:AssumeRole",
        "organizations:CreateAccount",
    ],
)
def test_the_deploy_role_cannot_reach_other_identities(action: str) -> None:
    assert not allowed(DEPLOY, action, STACK_ROLE, {**BOUNDED, **TAGGED})


def test_the_deploy_role_cannot_touch_the_boundary_or_the_ci_roles() -> None:
    for action in ("iam:CreatePolicyVersion", "iam:DeletePolicy", "iam:SetDefaultPolicyVersion"):
        assert not allowed(DEPLOY, action, ACCOUNT.boundary_arn), action
    for role in ACCOUNT.ci_role_arns:
        for action in ("iam:AttachRolePolicy", "iam:DeleteRole", "iam:UpdateAssumeRolePolicy", "iam:TagRole"):
            assert not allowed(DEPLOY, action, role, {**BOUNDED, "iam:PolicyARN": NODE_POLICY}), (action, role)


# --- KMS ------------------------------------------------------------------------------------------------------


def test_keys_are_created_only_with_the_stack_tag() -> None:
    assert allowed(DEPLOY, "kms:CreateKey", "*", TAGGED)
    assert not allowed(DEPLOY, "kms:CreateKey", "*")
    assert not allowed(DEPLOY, "kms:CreateKey", "*", {**TAGGED, "kms:BypassPolicyLockoutSafetyCheck": "true"})


def test_tagging_sets_the_stack_tag_and_nothing_else() -> None:
    assert allowed(DEPLOY, "kms:TagResource", KEY, {**TAGGED, "aws:TagKeys": [STACK_TAG_KEY]})
    assert not allowed(DEPLOY, "kms:TagResource", KEY, {**TAGGED, "aws:TagKeys": [STACK_TAG_KEY, "owner"]})
    assert not allowed(DEPLOY, "kms:TagResource", KEY, {"aws:TagKeys": ["owner"]})


@pytest.mark.parametrize(
    "action", ["kms:PutKeyPolicy", "kms:DescribeKey", "kms:EnableKeyRotation", "kms:UntagResource"]
)
def test_only_the_stacks_keys_are_managed(action: str) -> None:
    assert allowed(DEPLOY, action, KEY, KEY_OF_THE_STACK)
    assert not allowed(DEPLOY, action, KEY)


def test_a_key_policy_never_bypasses_the_lockout_check() -> None:
    assert not allowed(
        DEPLOY, "kms:PutKeyPolicy", KEY, {**KEY_OF_THE_STACK, "kms:BypassPolicyLockoutSafetyCheck": True}
    )


def test_grants_only_for_aws_services_on_the_stacks_keys() -> None:
    for_eks = {**KEY_OF_THE_STACK, "kms:GrantIsForAWSResource": "true"}
    assert allowed(DEPLOY, "kms:CreateGrant", KEY, for_eks)
    assert not allowed(DEPLOY, "kms:CreateGrant", KEY, {**KEY_OF_THE_STACK, "kms:GrantIsForAWSResource": "false"})
    assert not allowed(DEPLOY, "kms:CreateGrant", KEY, {"kms:GrantIsForAWSResource": "true"})


@pytest.mark.parametrize("days,expected", [(30, True), (7, False)])
def test_keys_are_deleted_only_with_the_full_window(days: int, expected: bool) -> None:
    context = {**KEY_OF_THE_STACK, "kms:ScheduleKeyDeletionPendingWindowInDays": days}
    assert allowed(DEPLOY, "kms:ScheduleKeyDeletion", KEY, context) is expected


def test_the_deploy_role_cannot_decrypt() -> None:
    assert not allowed(DEPLOY, "kms:Decrypt", KEY, KEY_OF_THE_STACK)


# --- EKS, ECR, logs, EC2 --------------------------------------------------------------------------------------


def _eks(resource: str) -> str:
    return f"arn:aws:eks:us-east-1:123456789012:{resource}"


@pytest.mark.parametrize("stack", stack_names())
def test_every_shipped_stacks_cluster_is_one_the_deploy_role_manages(stack: str) -> None:
    name = load_stack_config(stack).cluster_name
    assert name.startswith(ACCOUNT.cluster_name_prefix)
    assert allowed(DEPLOY, "eks:DeleteCluster", _eks(f"cluster/{name}"))
    assert allowed(DEPLOY, "eks:CreateNodegroup", _eks(f"cluster/{name}"))
    assert allowed(DEPLOY, "eks:UpdateNodegroupVersion", _eks(f"nodegroup/{name}/{name}-gpu-x/uuid"))
    assert allowed(DEPLOY, "eks:CreateAccessEntry", _eks(f"cluster/{name}"))
    assert allowed(DEPLOY, "eks:DeletePodIdentityAssociation", _eks(f"podidentityassociation/{name}/a-1"))


@pytest.mark.parametrize(
    "action,resource",
    [
        ("eks:DeleteCluster", "cluster/payments"),
        ("eks:AssociateAccessPolicy", "access-entry/payments/role/123456789012/ci/uuid"),
        ("eks:UpdateClusterConfig", "cluster/payments"),
    ],
)
def test_other_clusters_are_out_of_reach(action: str, resource: str) -> None:
    assert not allowed(DEPLOY, action, _eks(resource))


@pytest.mark.parametrize("action", ["eks:CreateCluster", "eks:DescribeAddonVersions", "ecr:GetAuthorizationToken"])
def test_actions_without_resources_are_allowed_on_every_resource(action: str) -> None:
    assert allowed(DEPLOY, action, "*")


def test_only_the_stacks_repositories_take_images() -> None:
    mine = f"arn:aws:ecr:us-east-1:123456789012:repository/{repository_name('p5-16')}"
    assert allowed(DEPLOY, "ecr:CreateRepository", mine)
    assert allowed(DEPLOY, "ecr:PutImage", mine)
    assert not allowed(DEPLOY, "ecr:PutImage", "arn:aws:ecr:us-east-1:123456789012:repository/payments/api")


def test_only_the_stacks_control_plane_log_groups() -> None:
    group = control_plane_log_group_name("fsdp-eks-p5-16")
    assert allowed(DEPLOY, "logs:CreateLogGroup", f"arn:aws:logs:us-east-1:123456789012:log-group:{group}")
    assert allowed(DEPLOY, "logs:PutRetentionPolicy", f"arn:aws:logs:us-east-1:123456789012:log-group:{group}:*")
    assert not allowed(DEPLOY, "logs:DeleteLogGroup", "arn:aws:logs:us-east-1:123456789012:log-group:/aws/cloudtrail")


@pytest.mark.parametrize(
    "action", ["ec2:CreateVpc", "ec2:CreateLaunchTemplate", "ec2:CreateNatGateway", "fsx:CreateFileSystem"]
)
def test_the_network_nodes_and_file_system_are_provisioned(action: str) -> None:
    assert allowed(DEPLOY, action, "*")


@pytest.mark.parametrize("action", EC2_REACH_INS)
def test_nothing_reaches_into_instances_disks_or_images_the_stack_does_not_own(action: str) -> None:
    assert not allowed(DEPLOY, action, "*")


# --- the boundary ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "action",
    [
        "iam:CreateRole",
        "iam:AttachRolePolicy",
        "iam:PutRolePolicy",
        "iam:PassRole",
        "iam:CreateAccessKey",
        "iam:UpdateAssumeRolePolicy",
        "sts:AssumeRole",
        "organizations:LeaveOrganization",
    ],
)
def test_a_bounded_role_cannot_grant_itself_or_another_identity_more(action: str) -> None:
    assert not allowed(BOUNDARY, action, STACK_ROLE)


@pytest.mark.parametrize(
    "action",
    [
        "s3:GetObject",
        "s3:ListBucket",
        "ssm:SendCommand",
        "ssm:PutParameter",
        "secretsmanager:PutSecretValue",
        "lambda:InvokeFunction",
        "ecr:PutImage",
        "logs:DeleteLogGroup",
        "eks:DeleteCluster",
        "dynamodb:Scan",
    ],
)
def test_a_bounded_role_gets_nothing_the_stacks_policies_do_not_use(action: str) -> None:
    """Whatever a policy under IAM_PATH allows: a hostile plan's policy cannot read buckets (the Pulumi state's),
    run commands on the account's instances or change its logs through a stack role."""
    assert not allowed(BOUNDARY, action)


@pytest.mark.parametrize(
    "policy,action", [(policy, action) for policy, actions in MANAGED_POLICY_ACTIONS.items() for action in actions]
)
def test_a_bounded_role_keeps_every_action_of_the_managed_policies_it_may_carry(policy: str, action: str) -> None:
    # AmazonEKSClusterPolicy creates only the load balancers' service-linked role (its own condition).
    context = {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}
    assert allowed(BOUNDARY, action.replace("*", "AnyAction"), "*", context), (policy, action)


def _secret_arn(name: str, account: str = ACCOUNT.account_id) -> str:
    """A secret's ARN as Secrets Manager forms it: the name, a hyphen and six random characters."""
    return f"arn:aws:secretsmanager:us-east-1:{account}:secret:{name}-AbC123"


TOKEN_SECRET = _secret_arn(DOCUMENTED_NAME)
# Secrets a stack role has no business reading: the account's others, one that only starts like the prefix, and one
# of the prefix's name in another account.
OTHER_SECRETS = [
    _secret_arn("prod/payments-db"),
    _secret_arn("fsdp-eks-ci/token"),
    _secret_arn("team/fsdp-eks/hf-token"),
    _secret_arn(DOCUMENTED_NAME, account="210987654321"),
]
VIA_SECRETS_MANAGER = {"kms:ViaService": "secretsmanager.us-east-1.amazonaws.com"}


def test_a_bounded_role_reads_the_token_secret_and_decrypts_it_through_secrets_manager() -> None:
    assert allowed(BOUNDARY, "secretsmanager:GetSecretValue", TOKEN_SECRET)
    for_the_token = {**VIA_SECRETS_MANAGER, "kms:EncryptionContext:SecretARN": TOKEN_SECRET}
    assert allowed(BOUNDARY, "kms:Decrypt", KEY, for_the_token)


@pytest.mark.parametrize("secret", OTHER_SECRETS)
def test_a_bounded_role_reads_no_other_secret(secret: str) -> None:
    """A hostile plan's policy under IAM_PATH may allow GetSecretValue on '*': the boundary still refuses it."""
    assert not allowed(BOUNDARY, "secretsmanager:GetSecretValue", secret)
    assert not allowed(BOUNDARY, "kms:Decrypt", KEY, {**VIA_SECRETS_MANAGER, "kms:EncryptionContext:SecretARN": secret})


def test_kms_decrypt_only_through_secrets_manager() -> None:
    for_the_token = {"kms:EncryptionContext:SecretARN": TOKEN_SECRET}
    assert not allowed(BOUNDARY, "kms:Decrypt", KEY, {**for_the_token, "kms:ViaService": "ssm.us-east-1.amazonaws.com"})
    assert not allowed(BOUNDARY, "kms:Decrypt", KEY, for_the_token)
    assert not allowed(BOUNDARY, "kms:Decrypt", KEY, VIA_SECRETS_MANAGER)  # no secret named: not a secret's decrypt
    assert not allowed(BOUNDARY, "kms:Decrypt", KEY)


def test_service_linked_roles_for_the_stacks_services_only() -> None:
    elb = {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}
    assert allowed(BOUNDARY, "iam:CreateServiceLinkedRole", "*", elb)
    assert not allowed(BOUNDARY, "iam:CreateServiceLinkedRole", "*", {"iam:AWSServiceName": "lambda.amazonaws.com"})


def test_the_documents_fit_iams_size_limits() -> None:
    """Inline role policies: 10,240 characters per role; managed policies: 6,144 (whitespace not counted; IAM User
    Guide, "IAM and AWS STS quotas")."""
    assert len(json.dumps(DEPLOY, separators=(",", ":"))) <= 10_240
    assert len(json.dumps(BOUNDARY, separators=(",", ":"))) <= 6_144


def test_an_existing_cluster_is_reached_only_when_granted_by_name() -> None:
    """A stack on a cluster it did not create (cluster.existing) needs the deploy role on that cluster: to read it
    (getCluster) and to make the job's Pod Identity association there. `python -m ci --existing-cluster NAME` grants
    that cluster and nothing beside it."""
    granted = deploy_policy(Account("123456789012", existing_clusters=("team-gpu",)))
    association = _eks("podidentityassociation/team-gpu/a-1")
    assert not allowed(DEPLOY, "eks:DescribeCluster", _eks("cluster/team-gpu"))
    assert allowed(granted, "eks:DescribeCluster", _eks("cluster/team-gpu"))
    assert allowed(granted, "eks:CreatePodIdentityAssociation", _eks("cluster/team-gpu"))
    assert allowed(granted, "eks:DeletePodIdentityAssociation", association)
    assert not allowed(granted, "eks:DeleteCluster", _eks("cluster/team-gpu-2"))
    assert not allowed(granted, "eks:DeleteCluster", _eks("cluster/payments"))
