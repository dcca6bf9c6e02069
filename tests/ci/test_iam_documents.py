"""The CI roles' IAM documents, parsed and asked concrete questions (tests/ci/iam_eval.py): who may assume each role,
what a preview may read, and what the deploy role may do with IAM."""

from __future__ import annotations

import json

import pytest

from ci.deploy_policy import ATTACHABLE_MANAGED_POLICIES, Account, deploy_policy, role_boundary
from ci.github_oidc import ISSUER_HOST, Repository, deploy_subjects, preview_subjects, trust_policy
from ci.preview_policy import INVOKE_ACTIONS, preview_actions, preview_policy
from tests.ci.iam_eval import allowed
from tests.harness.pulumi_program import ProgramRun, run_program

ACCOUNT = Account("123456789012")
REPO = Repository.parse("acme/fsdp-eks")
ROLE = ACCOUNT.arn("role", "cluster-node-4f2a9c1")
ADMIN = "arn:aws:iam::aws:policy/AdministratorAccess"
BOUNDED = {"iam:PermissionsBoundary": ACCOUNT.boundary_arn}
DEPLOY, PREVIEW, BOUNDARY = deploy_policy(ACCOUNT), preview_policy(), role_boundary(ACCOUNT)


def _assume(policy: dict, subject: str, audience: str = "sts.amazonaws.com") -> bool:
    (statement,) = policy["Statement"]
    context = {f"{ISSUER_HOST}:sub": subject, f"{ISSUER_HOST}:aud": audience}
    return statement["Principal"]["Federated"].endswith(ISSUER_HOST) and allowed(
        {"Statement": [{k: v for k, v in statement.items() if k != "Principal"} | {"Resource": "*"}]},
        "sts:AssumeRoleWithWebIdentity",
        "*",
        context,
    )


# --- trust ----------------------------------------------------------------------------------------------------


def test_the_preview_role_trusts_this_repositorys_pull_requests_and_main_only() -> None:
    trust = trust_policy(ACCOUNT.account_id, preview_subjects(REPO))
    assert _assume(trust, "repo:acme/fsdp-eks:pull_request")
    assert _assume(trust, "repo:acme/fsdp-eks:ref:refs/heads/main")
    for other in (
        "repo:acme/fsdp-eks:ref:refs/heads/feature",
        "repo:evil/fsdp-eks:pull_request",
        "repo:acme/fsdp-eks:environment:pulumi-up",
        "repo:acme/fsdp-eks-fork:pull_request",
    ):
        assert not _assume(trust, other), other
    assert not _assume(trust, "repo:acme/fsdp-eks:pull_request", audience="https://github.com/acme")


def test_the_deploy_role_trusts_only_the_pulumi_up_environment() -> None:
    trust = trust_policy(ACCOUNT.account_id, deploy_subjects(REPO))
    assert _assume(trust, "repo:acme/fsdp-eks:environment:pulumi-up")
    for other in (
        "repo:acme/fsdp-eks:ref:refs/heads/main",
        "repo:acme/fsdp-eks:pull_request",
        "repo:acme/fsdp-eks:environment:staging",
    ):
        assert not _assume(trust, other), other


def test_trust_conditions_are_exact_subjects_without_wildcards() -> None:
    for subjects in (preview_subjects(REPO), deploy_subjects(REPO)):
        (statement,) = trust_policy(ACCOUNT.account_id, subjects)["Statement"]
        assert set(statement["Condition"]) == {"StringEquals"}
        assert not any("*" in s for s in statement["Condition"]["StringEquals"][f"{ISSUER_HOST}:sub"])


def test_immutable_subject_claims_carry_the_owner_and_repository_ids() -> None:
    repo = Repository.parse("acme/fsdp-eks", owner_id=123456, repository_id=456789)
    assert repo.environment() == "repo:acme@123456/fsdp-eks@456789:environment:pulumi-up"
    with pytest.raises(ValueError):
        Repository.parse("acme/fsdp-eks", owner_id=1)


# --- preview --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "action,resource",
    [
        ("s3:GetObject", "arn:aws:s3:::state-bucket/key"),
        ("ssm:GetParameter", "*"),
        ("ssm:GetParametersByPath", "*"),
        ("logs:GetLogEvents", "*"),
        ("logs:FilterLogEvents", "*"),
        ("secretsmanager:GetSecretValue", "*"),
        ("kms:Decrypt", "*"),
        ("eks:DescribeCluster", "*"),
        ("ec2:DescribeInstances", "*"),
        ("iam:GetRole", "*"),
    ],
)
def test_the_preview_role_reads_no_data_a_pull_request_could_print(action: str, resource: str) -> None:
    assert not allowed(PREVIEW, action, resource)


def test_the_preview_role_only_reads() -> None:
    assert preview_actions() and all(a.split(":")[1].startswith(("Describe", "Get", "List")) for a in preview_actions())
    assert not any("*" in a for a in preview_actions())


@pytest.fixture(scope="module", params=["first", "update"])
def preview_runs(request: pytest.FixtureRequest) -> list[ProgramRun]:
    """A stack that builds everything, and the option that adds a data source, as that kind of preview runs them."""
    runs = [run_program("p5-16", preview=request.param)]
    runs.append(run_program("p5-2", {"fsdp-eks:monitoring": {"cloudwatchObservability": True}}, preview=request.param))
    assert all(r.error is None for r in runs), [r.error for r in runs]
    return runs


def test_every_data_source_a_preview_calls_is_allowed_to_the_preview_role(preview_runs: list[ProgramRun]) -> None:
    called = {token for run in preview_runs for token in run.invokes}
    assert called and called <= set(INVOKE_ACTIONS), called - set(INVOKE_ACTIONS)
    for token in called:
        assert all(allowed(PREVIEW, action) for action in INVOKE_ACTIONS[token]), token


# --- deploy ---------------------------------------------------------------------------------------------------


def test_the_deploy_role_creates_roles_only_with_the_boundary() -> None:
    assert allowed(DEPLOY, "iam:CreateRole", ROLE, BOUNDED)
    assert not allowed(DEPLOY, "iam:CreateRole", ROLE)
    assert not allowed(DEPLOY, "iam:CreateRole", ROLE, {"iam:PermissionsBoundary": ADMIN})
    assert not allowed(DEPLOY, "iam:PutRolePermissionsBoundary", ROLE, {"iam:PermissionsBoundary": ADMIN})
    assert not allowed(DEPLOY, "iam:DeleteRolePermissionsBoundary", ROLE, BOUNDED)


def test_the_deploy_role_attaches_only_the_programs_policies_and_only_to_bounded_roles() -> None:
    node = ACCOUNT.managed_policy_arn("AmazonEKSWorkerNodePolicy")
    assert allowed(DEPLOY, "iam:AttachRolePolicy", ROLE, {**BOUNDED, "iam:PolicyARN": node})
    assert not allowed(DEPLOY, "iam:AttachRolePolicy", ROLE, {**BOUNDED, "iam:PolicyARN": ADMIN})
    assert not allowed(DEPLOY, "iam:AttachRolePolicy", ROLE, {"iam:PolicyARN": node})
    assert not allowed(DEPLOY, "iam:PutRolePolicy", ROLE)
    assert allowed(DEPLOY, "iam:PutRolePolicy", ROLE, BOUNDED)


def _attached_policies(run: ProgramRun) -> set[str]:
    return {r.inputs["policyArn"] for r in run.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")}


def test_every_policy_the_program_attaches_may_be_attached(stack_run: ProgramRun) -> None:
    with_cloudwatch = run_program("p5-2", {"fsdp-eks:monitoring": {"cloudwatchObservability": True}})
    attached = _attached_policies(stack_run) | _attached_policies(with_cloudwatch)
    allowlist = {ACCOUNT.managed_policy_arn(p) for p in ATTACHABLE_MANAGED_POLICIES}
    assert attached and attached <= allowlist, attached - allowlist
    # pulumi-eks's cluster service role (nodejs/eks/cluster/cluster.ts: AmazonEKSClusterPolicy)
    assert ACCOUNT.managed_policy_arn("AmazonEKSClusterPolicy") in allowlist


@pytest.mark.parametrize(
    "service,expected",
    [
        ("eks.amazonaws.com", True),
        ("pods.eks.amazonaws.com", True),
        ("ec2.amazonaws.com", False),
        ("lambda.amazonaws.com", False),
    ],
)
def test_the_deploy_role_passes_roles_only_to_eks(service: str, expected: bool) -> None:
    assert allowed(DEPLOY, "iam:PassRole", ROLE, {"iam:PassedToService": service}) is expected


@pytest.mark.parametrize(
    "action",
    [
        "iam:UpdateAssumeRolePolicy",
        "iam:CreateUser",
        "iam:CreateAccessKey",
        "iam:CreatePolicy",
        "iam:CreateInstanceProfile",
        "iam:AddRoleToInstanceProfile",
        "sts:AssumeRole",
        "organizations:CreateAccount",
    ],
)
def test_the_deploy_role_cannot_reach_other_identities(action: str) -> None:
    assert not allowed(DEPLOY, action, ROLE, BOUNDED)


def test_the_deploy_role_cannot_touch_the_boundary_or_the_ci_roles() -> None:
    assert not allowed(DEPLOY, "iam:CreatePolicyVersion", ACCOUNT.boundary_arn)
    assert not allowed(DEPLOY, "iam:DeletePolicy", ACCOUNT.boundary_arn)
    for role in ACCOUNT.ci_role_arns:
        for action in ("iam:PutRolePolicy", "iam:AttachRolePolicy", "iam:DeleteRole", "iam:UpdateRole"):
            assert not allowed(DEPLOY, action, role, {**BOUNDED, "iam:PolicyARN": ADMIN}), (action, role)


@pytest.mark.parametrize(
    "action",
    [
        "ec2:CreateVpc",
        "ec2:CreateLaunchTemplate",
        "eks:CreateCluster",
        "eks:CreateNodegroup",
        "ecr:CreateRepository",
        "fsx:CreateFileSystem",
        "kms:CreateKey",
        "kms:CreateGrant",
        "logs:CreateLogGroup",
    ],
)
def test_the_deploy_role_provisions_the_stack(action: str) -> None:
    assert allowed(DEPLOY, action, "*")


def test_the_deploy_role_cannot_decrypt_with_the_keys_it_manages() -> None:
    assert not allowed(DEPLOY, "kms:Decrypt", "*")


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
    ],
)
def test_a_bounded_role_cannot_grant_itself_or_another_identity_more(action: str) -> None:
    assert not allowed(BOUNDARY, action, ROLE)


def test_a_bounded_role_keeps_what_its_managed_policies_need() -> None:
    assert allowed(BOUNDARY, "ec2:DescribeInstances")
    assert allowed(BOUNDARY, "ecr:BatchGetImage")
    assert allowed(
        BOUNDARY, "iam:CreateServiceLinkedRole", "*", {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}
    )
    assert not allowed(BOUNDARY, "iam:CreateServiceLinkedRole", "*", {"iam:AWSServiceName": "lambda.amazonaws.com"})


def test_the_documents_fit_iams_size_limits() -> None:
    """Inline role policies: 10,240 characters per role; managed policies: 6,144 (whitespace not counted)."""
    compact = {
        name: len(json.dumps(doc, separators=(",", ":")))
        for name, doc in {"deploy": DEPLOY, "preview": PREVIEW, "boundary": BOUNDARY}.items()
    }
    assert compact["deploy"] + 0 <= 10_240 and compact["preview"] <= 10_240 and compact["boundary"] <= 6_144
