"""Whether the Hugging Face token's secret exists in the stack's region: DescribeSecret, its metadata only.

The job's launcher reads it at start and ends with exit 4 when it cannot (docs/job.md, "The Hugging Face token"),
after the nodes are up. The preflight never reads the value (no GetSecretValue).
"""

from __future__ import annotations

from preflight.aws import Client, aws_errors, error_code, error_text
from preflight.findings import Finding, ok, problem
from stack.config import StackConfig

CHECK = "token secret"


def secret_findings(config: StackConfig, secrets: Client) -> list[Finding]:
    secret, region = config.job.hf_token_secret, config.region
    if secret is None:
        return []
    try:
        described = secrets.describe_secret(SecretId=secret)
    except aws_errors() as error:
        if error_code(error) == "ResourceNotFoundException":
            return [
                problem(
                    CHECK,
                    f"no secret {secret} in {region}",
                    f'aws secretsmanager create-secret --region {region} --name {secret} --secret-string "$HF_TOKEN"',
                )
            ]
        return [
            problem(
                CHECK,
                f"cannot describe {secret} in {region}: {error_text(error)}",
                "allow secretsmanager:DescribeSecret on it, or check the name and the region",
            )
        ]
    if described.get("DeletedDate"):
        return [
            problem(
                CHECK,
                f"{secret} in {region} is scheduled for deletion ({described['DeletedDate']:%Y-%m-%d})",
                f"aws secretsmanager restore-secret --region {region} --secret-id {secret}",
            )
        ]
    return [ok(CHECK, f"{described['Name']} exists in {region} (its value was not read)")]
