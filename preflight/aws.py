"""The AWS clients the preflight asks, in the stack's region, and AWS's answer to a failed call in its own words."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Client = Any  # a boto3 client: boto3 ships no type stubs


@dataclass(frozen=True)
class AwsClients:
    sts: Client
    ec2: Client
    quotas: Client
    secrets: Client
    s3: Client


def aws_clients(region: str) -> AwsClients:
    """Clients for the stack's region with the caller's own credentials (the usual chain: environment, profile, SSO)."""
    from boto3.session import Session

    session = Session(region_name=region)
    return AwsClients(
        sts=session.client("sts"),
        ec2=session.client("ec2"),
        quotas=session.client("service-quotas"),
        secrets=session.client("secretsmanager"),
        s3=session.client("s3"),
    )


def error_code(error: BaseException) -> str:
    """AWS's error code of a ClientError, else the exception's name (no credentials, no endpoint)."""
    from botocore.exceptions import ClientError

    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Code") or "")
    return type(error).__name__


def error_text(error: BaseException) -> str:
    """`Code: Message` as AWS answered, or the exception's own words where no call was answered."""
    from botocore.exceptions import ClientError

    if isinstance(error, ClientError):
        details = error.response.get("Error", {})
        return f"{details.get('Code') or 'unknown error'}: {details.get('Message') or 'no message'}"
    return f"{type(error).__name__}: {error}"


def aws_errors() -> tuple[type[BaseException], ...]:
    """What a boto3 call raises when AWS refuses it or cannot be reached."""
    from botocore.exceptions import BotoCoreError, ClientError

    return (ClientError, BotoCoreError)
