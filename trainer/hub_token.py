"""The Hugging Face token, read by the launcher from AWS Secrets Manager at the pod's start. Torch-free: the manifest
(workloads/job/manifest.py) names the variables from here.

The stack never holds the token: it names the secret (job.hfTokenSecret), the pod gets HF_TOKEN_SECRET (the secret's
name or ARN) and AWS_REGION, and its service account a Pod Identity role allowed GetSecretValue on that secret alone
(infra/hub_token_access.py). boto3 finds the role's credentials through its container credential provider, which
reads the AWS_CONTAINER_CREDENTIALS_FULL_URI and AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE that EKS sets on a pod whose
service account has a Pod Identity association (AWS SDKs and Tools reference guide, "Container credential
provider"; EKS user guide, "Understand how EKS Pod Identity works"). The
launcher puts the token into its own environment as HF_TOKEN (the variable huggingface_hub reads first,
huggingface_hub/utils/_auth.py), so that the staging child and torchrun's workers inherit it.

A secret that cannot be read (missing, denied, not a string, empty) fails the job for good: no new pod would find it
any different, so the launcher exits EXIT_STAGING_FAILED before any download or rendezvous, naming the secret and
AWS's error code and message, never the token.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

# What the pod's container is given (workloads/job/manifest.py), and what the launcher sets.
SECRET_VARIABLE = "HF_TOKEN_SECRET"
REGION_VARIABLE = "AWS_REGION"
TOKEN_VARIABLE = "HF_TOKEN"
# botocore's service-specific endpoint override for Secrets Manager (AWS SDKs and Tools reference guide,
# "Service-specific endpoints"; botocore configprovider.py builds AWS_ENDPOINT_URL_<SERVICE ID>): the tests point the
# launcher at a local Secrets Manager with it, and nothing in the pod sets it.
ENDPOINT_VARIABLE = "AWS_ENDPOINT_URL_SECRETS_MANAGER"


class HubTokenError(RuntimeError):
    """The secret could not be read; the message names the secret and AWS's error, never a secret value. It is one
    line (the launcher's reason line is the pod's last word), whatever an endpoint answered."""

    def __init__(self, message: str):
        super().__init__(" ".join(message.split()))


@dataclass(frozen=True)
class SecretRead:
    """What GetSecretValue answered: the SecretString, or None when the secret holds SecretBinary instead."""

    secret_string: str | None


def _get_secret_value(secret_id: str, region: str | None) -> SecretRead:
    """One GetSecretValue call through boto3 (imported here: only a pod that names a secret needs it)."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        client = boto3.client("secretsmanager", region_name=region)
        answer: dict[str, Any] = client.get_secret_value(SecretId=secret_id)
    except ClientError as error:
        details = error.response.get("Error", {})
        raise HubTokenError(
            f"could not read the Hugging Face token from Secrets Manager secret {secret_id!r}: "
            f"{details.get('Code', 'unknown error')}: {details.get('Message', 'no message')}"
        ) from None
    except BotoCoreError as error:  # no credentials, no region, the endpoint unreachable
        raise HubTokenError(
            f"could not read the Hugging Face token from Secrets Manager secret {secret_id!r}: "
            f"{type(error).__name__}: {error}"
        ) from None
    return SecretRead(answer.get("SecretString"))


def token_from(read: SecretRead, secret_id: str) -> str:
    """The token in the secret's SecretString, stripped of surrounding white space (a trailing newline from
    `--secret-string "$(cat token)"` would break the hub's Authorization header)."""
    if read.secret_string is None:
        raise HubTokenError(
            f"Secrets Manager secret {secret_id!r} holds no SecretString (binary?); expected the token as plain text"
        )
    token = read.secret_string.strip()
    if not token:
        raise HubTokenError(f"Secrets Manager secret {secret_id!r} holds an empty SecretString; expected the token")
    return token


def load_hub_token(environ: MutableMapping[str, str] | None = None) -> str | None:
    """When HF_TOKEN_SECRET names a secret, read it and set HF_TOKEN in `environ` (default: this process's
    environment, which the launcher's children inherit); returns the secret's id, or None when none is named.
    Raises HubTokenError when the secret cannot be read."""
    environ = os.environ if environ is None else environ
    secret_id = environ.get(SECRET_VARIABLE)
    if not secret_id:
        return None
    environ[TOKEN_VARIABLE] = token_from(_get_secret_value(secret_id, environ.get(REGION_VARIABLE)), secret_id)
    return secret_id
