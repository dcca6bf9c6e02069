"""The job's pods may read the one secret holding the Hugging Face token and nothing else (infra/hub_token_access.py):
the read policy's documents, and what a stack with a gated model registers under the mocks."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import parliament
import pytest

from infra.hub_token_access import AccountFacts, secret_read_policy
from stack.files import load_stack_config, stack_names
from stack.gated_models import gated_repo
from stack.names import IAM_PATH, STACK_TAG_KEY, TRAINING_NAMESPACE
from tests.harness.pulumi_program import ProgramRun, run_program
from workloads.job.spec import trainer_service_account

FACTS = AccountFacts(partition="aws", dns_suffix="amazonaws.com", region="us-east-1", account="123456789012")
ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:team/hf-token-AbC123"
GATED_STACKS = [s for s in stack_names() if gated_repo(load_stack_config(s).job.model)]
POLICY = "aws:iam/policy:Policy"
ROLE = "aws:iam/role:Role"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"


def statements(document: str) -> list[dict[str, Any]]:
    return json.loads(document)["Statement"]


def by_action(document: str) -> dict[str, dict[str, Any]]:
    return {statement["Action"]: statement for statement in statements(document)}


def test_a_named_secret_is_read_on_its_arn_with_its_six_random_characters_alone() -> None:
    read = by_action(secret_read_policy("fsdp-eks/hf-token", FACTS))["secretsmanager:GetSecretValue"]
    assert read["Resource"] == "arn:aws:secretsmanager:us-east-1:123456789012:secret:fsdp-eks/hf-token-??????"


def test_a_secret_given_by_arn_is_read_on_that_arn() -> None:
    assert by_action(secret_read_policy(ARN, FACTS))["secretsmanager:GetSecretValue"]["Resource"] == ARN


def test_the_policy_grants_getsecretvalue_and_decrypt_and_nothing_else() -> None:
    assert set(by_action(secret_read_policy(ARN, FACTS))) == {"secretsmanager:GetSecretValue", "kms:Decrypt"}
    assert all(s["Effect"] == "Allow" for s in statements(secret_read_policy(ARN, FACTS)))


def test_decrypt_only_as_secrets_manager_decrypts_this_secret() -> None:
    decrypt = by_action(secret_read_policy("fsdp-eks/hf-token", FACTS))["kms:Decrypt"]
    assert decrypt["Condition"]["StringEquals"] == {"kms:ViaService": "secretsmanager.us-east-1.amazonaws.com"}
    context = decrypt["Condition"]["StringLike"]["kms:EncryptionContext:SecretARN"]
    assert context == "arn:aws:secretsmanager:us-east-1:123456789012:secret:fsdp-eks/hf-token-??????"


def test_the_china_partition_gets_its_own_service_domain() -> None:
    china = AccountFacts(partition="aws-cn", dns_suffix="amazonaws.com.cn", region="cn-north-1", account="1" * 12)
    decrypt = by_action(secret_read_policy("fsdp-eks/hf-token", china))["kms:Decrypt"]
    assert decrypt["Condition"]["StringEquals"]["kms:ViaService"] == "secretsmanager.cn-north-1.amazonaws.com.cn"
    assert decrypt["Resource"].startswith("arn:aws-cn:kms:cn-north-1:")


@pytest.mark.parametrize("secret", ["fsdp-eks/hf-token", ARN])
def test_parliament_finds_nothing_in_the_policy(secret: str) -> None:
    findings = parliament.analyze_policy_string(secret_read_policy(secret, FACTS)).findings
    assert [(f.issue, f.detail) for f in findings] == []


@cache
def gated_run(stack: str) -> ProgramRun:
    run = run_program(stack)
    assert run.error is None, run.error
    return run


@pytest.mark.program
@pytest.mark.parametrize("stack", GATED_STACKS)
def test_a_gated_stack_registers_one_read_policy_on_its_secret(stack: str) -> None:
    run = gated_run(stack)
    (policy,) = [p for p in run.of_type(POLICY) if "hub-token" in p.name]
    read = [s for s in statements(policy.inputs["policy"]) if s["Action"].startswith("secretsmanager:")]
    (only,) = read
    assert only["Action"] == "secretsmanager:GetSecretValue" and isinstance(only["Resource"], str)
    assert f":secret:{load_stack_config(stack).job.hf_token_secret}-??????" in only["Resource"]
    assert policy.inputs["path"] == IAM_PATH and policy.inputs["tags"] == {STACK_TAG_KEY: stack}


@pytest.mark.program
@pytest.mark.parametrize("stack", GATED_STACKS)
def test_the_reader_role_is_under_the_path_with_the_tag_and_trusts_the_jobs_account_alone(stack: str) -> None:
    run = gated_run(stack)
    (association,) = [a.inputs for a in run.of_type(ASSOCIATION) if a.inputs["namespace"] == TRAINING_NAMESPACE]
    (role,) = [r for r in run.of_type(ROLE) if r.outputs.get("arn") == association["roleArn"]]
    assert role.inputs["path"] == IAM_PATH and role.inputs["tags"] == {STACK_TAG_KEY: stack}
    (trust,) = statements(role.inputs["assumeRolePolicy"])
    tags = trust["Condition"]["StringEquals"]
    account = trainer_service_account(f"fsdp-{stack}")
    assert (tags["aws:RequestTag/kubernetes-namespace"], tags["aws:RequestTag/kubernetes-service-account"]) == (
        TRAINING_NAMESPACE,
        account,
    )
    assert (association["namespace"], association["serviceAccount"]) == (TRAINING_NAMESPACE, account)
    assert association["clusterName"] == load_stack_config(stack).cluster_name
    assert "inlinePolicies" not in role.inputs


@pytest.mark.program
@pytest.mark.parametrize("stack", GATED_STACKS)
def test_no_kubernetes_secret_anywhere_in_the_job(stack: str) -> None:
    run = gated_run(stack)
    (job,) = run.of_type("fsdp-eks:workloads:TrainingJob")
    in_job = {r.urn for r in run.resources if r.parent == job.urn}
    assert not [r for r in run.of_type("kubernetes:core/v1:Secret") if r.urn in in_job or r.parent in in_job]
    assert not run.of_type("aws:iam/rolePolicy:RolePolicy")
