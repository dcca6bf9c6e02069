"""The token's secret, described (never read) in the stack's region: there, missing, or scheduled for deletion."""

from __future__ import annotations

from dataclasses import replace

from preflight.aws import AwsClients
from preflight.secret import secret_findings
from stack.config import StackConfig
from stack.files import load_stack_config

SECRET = "fsdp-eks/hf-token"


def p5_2(secret: str | None = SECRET) -> StackConfig:
    config = load_stack_config("p5-2")
    return replace(config, job=replace(config.job, hf_token_secret=secret))


def test_a_secret_in_the_stacks_region_passes_without_its_value_read(aws: AwsClients) -> None:
    aws.secrets.create_secret(Name=SECRET, SecretString="hf_not_a_real_token")
    (finding,) = secret_findings(p5_2(), aws.secrets)
    assert (finding.level, finding.what) == ("ok", f"{SECRET} exists in us-east-1 (its value was not read)")
    assert "hf_not_a_real_token" not in str(finding)


def test_a_missing_secret_is_a_problem_with_the_create_command_for_the_region(aws: AwsClients) -> None:
    (finding,) = secret_findings(p5_2(), aws.secrets)
    assert (finding.level, finding.what) == ("problem", f"no secret {SECRET} in us-east-1")
    assert finding.fix == (
        f'aws secretsmanager create-secret --region us-east-1 --name {SECRET} --secret-string "$HF_TOKEN"'
    )


def test_a_secret_in_another_region_is_missing_in_the_stacks(aws: AwsClients) -> None:
    from preflight.aws import aws_clients

    aws_clients("eu-west-1").secrets.create_secret(Name=SECRET, SecretString="hf_x")
    (finding,) = secret_findings(p5_2(), aws.secrets)
    assert finding.level == "problem" and "--region us-east-1" in finding.fix


def test_a_secret_scheduled_for_deletion_is_a_problem_with_the_restore_command(aws: AwsClients) -> None:
    aws.secrets.create_secret(Name=SECRET, SecretString="hf_x")
    aws.secrets.delete_secret(SecretId=SECRET, RecoveryWindowInDays=7)
    (finding,) = secret_findings(p5_2(), aws.secrets)
    assert finding.level == "problem" and "scheduled for deletion" in finding.what
    assert finding.fix == f"aws secretsmanager restore-secret --region us-east-1 --secret-id {SECRET}"


def test_no_secret_named_no_check(aws: AwsClients) -> None:
    assert secret_findings(p5_2(None), aws.secrets) == []


def test_the_only_call_is_describe_secret(aws: AwsClients) -> None:
    aws.secrets.create_secret(Name=SECRET, SecretString="hf_x")
    calls: list[str] = []
    aws.secrets.meta.events.register("before-call.secrets-manager", lambda model, **_: calls.append(model.name))
    secret_findings(p5_2(), aws.secrets)
    assert calls == ["DescribeSecret"]
