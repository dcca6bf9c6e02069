"""Every IAM document of the project linted with parliament (duo-labs/parliament, the AWS Service Authorization
Reference bundled as its iam_definition.json): the CI roles' policies and trust, the permissions boundary, the
resource control policy over the stacks' buckets, and every document the program registers (role trust policies,
customer managed policies, the KMS key policy) for every shipped stack. A finding fails unless it is in ALLOWED, keyed
by (document, statement Sid, finding) with the reason; an entry no document produces fails too, so the list cannot
outlive what it excuses.

Each statement is linted alone, so a finding names its statement.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from parliament import analyze_policy_string

from ci.bucket_perimeter import bucket_perimeter_policy
from ci.deploy_policy import Account, deploy_policy
from ci.github_oidc import Repository, deploy_subjects, preview_subjects, trust_policy
from ci.preview_policy import preview_policy
from ci.role_boundary import role_boundary
from tests.harness.pulumi_program import ProgramRun, run_program

ACCOUNT = Account("123456789012")
REPO = Repository.parse("acme/fsdp-eks")
Finding = tuple[str, str, str]  # (document, statement Sid or "-", parliament's issue)

POD_IDENTITY_SID = "AllowEksAuthToAssumeRoleForPodIdentity"  # infra/iam.py pod_identity_trust_policy
TRUST_NAMES_NO_RESOURCE = (
    "a trust policy is the role's resource-based policy: it names a Principal and no Resource (IAM User Guide, "
    "'IAM JSON policy elements: Resource'); parliament lints identity policies only"
)
ALLOWED: dict[Finding, str] = {
    ("deploy", "NetworkAndNodes", "RESOURCE_STAR"): (
        "ec2:* stays service-wide: the stack's VPC resources are only known once created and are not tagged with the "
        "stack's tag; the reach-ins are denied (ci/deploy_policy.py EC2_REACH_INS)"
    ),
    ("deploy", "CheckpointFileSystems", "RESOURCE_STAR"): (
        "fsx:* stays service-wide: infra/lustre.py does not tag the file system with the stack's tag"
    ),
    ("deploy", "TheStacksClusters", "RESOURCE_MISMATCH"): (
        "eks:* on the stacks' cluster ARNs: the EKS actions that take no resource get nothing from this statement "
        "and are granted on '*' in EksWithoutResources"
    ),
    ("deploy", "TheStacksRepositories", "RESOURCE_MISMATCH"): (
        "ecr:* on the stacks' repositories: registry-wide actions get nothing from it (GetAuthorizationToken: "
        "RegistryLogin)"
    ),
    ("deploy", "TheStacksLogGroups", "RESOURCE_MISMATCH"): (
        "logs:* on the control-plane log groups: actions on other logs resources get nothing from it "
        "(DescribeLogGroups: ListLogGroups)"
    ),
    ("deploy", "TagKeysWithTheStackTagOnly", "RESOURCE_STAR"): (
        "tagging a key while creating it needs kms:TagResource in an IAM policy not restricted to particular keys "
        "(AWS KMS developer guide, 'Controlling access to tags'); the request may carry the stack's tag only"
    ),
    ("deploy", "CreateAndConfigureTheStacksBuckets", "RESOURCE_POLICY_PRIVILEGE_ESCALATION"): (
        "the deploy role writes the artifacts bucket's deny-only TLS policy (s3:PutBucketPolicy) and has no object "
        "access: a bucket policy it wrote could grant it some, but NoObjectAccessEvenThroughABucketPolicy denies every "
        "object action explicitly, which wins over any bucket policy's allow (tests/ci/test_s3_access.py); a grant it "
        "wrote to another account is inert under the stacks' buckets' RCP (ci/bucket_perimeter.py)"
    ),
    ("boundary", "WhatTheStacksPoliciesUse", "RESOURCE_STAR"): (
        "a permissions boundary caps actions; the resources are the attached policies' to name"
    ),
    ("boundary", "DecryptOnlyTheStacksSecretsThroughSecretsManager", "RESOURCE_STAR"): (
        "the key of a secret is the secret owner's choice; kms:ViaService holds the decrypt to Secrets Manager and "
        "kms:EncryptionContext:SecretARN to the stacks' secrets"
    ),
    ("boundary", "NoIamChanges", "UNKNOWN_CONDITION_FOR_ACTION"): (
        "iam:AWSServiceName exists only for iam:CreateServiceLinkedRole; for every other IAM write it is missing, "
        "which makes StringNotEquals true, so the deny holds for them all (IAM User Guide, 'Condition operators')"
    ),
    ("preview", "WhatAPreviewCalls", "RESOURCE_STAR"): (
        "eks:DescribeCluster of an existing cluster named by cluster.name, which any name may be "
        "(infra/existing_cluster.py); the preview role reads, it cannot change"
    ),
    ("github-trust", "GitHubActionsOfThisRepository", "MALFORMED"): TRUST_NAMES_NO_RESOURCE,
    ("github-trust", "GitHubActionsOfThisRepository", "UNKNOWN_FEDERATION_SOURCE"): (
        "GitHub's OIDC provider (token.actions.githubusercontent.com) is not in parliament's list of known IdPs"
    ),
    ("role-trust", "-", "MALFORMED"): TRUST_NAMES_NO_RESOURCE,
    ("role-trust", POD_IDENTITY_SID, "MALFORMED"): TRUST_NAMES_NO_RESOURCE,
    ("key-policy", "EnableIamPolicies", "RESOURCE_STAR"): (
        "in a key policy '*' is the key itself; the statement is AWS KMS's default key policy, which leaves the "
        "decision to IAM (AWS KMS developer guide, 'Default key policy')"
    ),
}


def findings(document_kind: str, document: dict[str, Any]) -> set[Finding]:
    """parliament's findings of each statement of `document`, linted as a policy of its own."""
    found: set[Finding] = set()
    for statement in document["Statement"]:
        policy = analyze_policy_string(json.dumps({"Version": "2012-10-17", "Statement": [statement]}))
        found |= {(document_kind, statement.get("Sid", "-"), f.issue) for f in policy.findings}
    return found


def ci_documents() -> Iterator[tuple[str, dict[str, Any]]]:
    yield "deploy", deploy_policy(ACCOUNT)
    yield "boundary", role_boundary(ACCOUNT.account_id, ACCOUNT.partition)
    yield "preview", preview_policy()
    yield "rcp", bucket_perimeter_policy(ACCOUNT)
    for subjects in (preview_subjects(REPO), deploy_subjects(REPO)):
        yield "github-trust", trust_policy(ACCOUNT.account_id, subjects)


def program_documents(run: ProgramRun) -> Iterator[tuple[str, dict[str, Any]]]:
    for role in run.of_type("aws:iam/role:Role"):
        yield "role-trust", json.loads(role.inputs["assumeRolePolicy"])
    for policy in run.of_type("aws:iam/policy:Policy"):
        yield "customer-policy", json.loads(policy.inputs["policy"])
    for key in run.of_type("aws:kms/key:Key"):
        yield "key-policy", json.loads(key.inputs["policy"])


def unexplained(found: set[Finding]) -> set[Finding]:
    return found - set(ALLOWED)


@pytest.fixture(scope="module")
def with_cloudwatch() -> ProgramRun:
    """The one option that adds a role no shipped stack has (the CloudWatch agent's)."""
    run = run_program("p5-2", {"fsdp-eks:monitoring": {"cloudwatchObservability": True}})
    assert run.error is None, run.error
    return run


def test_the_ci_documents_have_no_unexplained_finding() -> None:
    found = set().union(*(findings(kind, document) for kind, document in ci_documents()))
    assert not unexplained(found), unexplained(found)


@pytest.mark.program
def test_every_document_the_program_registers_has_no_unexplained_finding(stack_run: ProgramRun) -> None:
    documents = list(program_documents(stack_run))
    assert {kind for kind, _ in documents} >= {"role-trust", "key-policy"}, stack_run.stack
    found = set().union(*(findings(kind, document) for kind, document in documents))
    assert not unexplained(found), (stack_run.stack, unexplained(found))


@pytest.mark.program
def test_the_cloudwatch_agents_documents_have_no_unexplained_finding(with_cloudwatch: ProgramRun) -> None:
    found = set().union(*(findings(kind, document) for kind, document in program_documents(with_cloudwatch)))
    assert not unexplained(found), unexplained(found)


@pytest.mark.program
def test_every_allowed_finding_is_still_produced(with_cloudwatch: ProgramRun) -> None:
    documents = [*ci_documents(), *program_documents(with_cloudwatch)]
    found = set().union(*(findings(kind, document) for kind, document in documents))
    assert set(ALLOWED) <= found, set(ALLOWED) - found


@pytest.mark.parametrize(
    "statement,issue",
    [
        ({"Effect": "Allow", "Action": "s3:GetObjekt", "Resource": "*"}, "UNKNOWN_ACTION"),
        ({"Effect": "Allow", "Action": "iam:PassRole", "Resource": "*"}, "RESOURCE_STAR"),
        (
            {
                "Effect": "Allow",
                "Action": "kms:CreateGrant",
                "Resource": "*",
                "Condition": {"StringEquals": {"kms:GrantIsForAwsResources": "true"}},
            },
            "UNKNOWN_CONDITION_FOR_ACTION",
        ),
    ],
)
def test_a_bad_document_is_caught(statement: dict[str, Any], issue: str) -> None:
    for kind in ("deploy", "customer-policy"):
        found = findings(kind, {"Statement": [{"Sid": "Bad", **statement}]})
        assert (kind, "Bad", issue) in unexplained(found)
