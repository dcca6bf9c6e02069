"""The Hugging Face token, read by the launcher from AWS Secrets Manager at the pod's start. Torch-free: the manifest
(workloads/job/pod.py) names the variables from here.

The stack never holds the token: it names the secret (job.hfTokenSecret), the pod gets HF_TOKEN_SECRET (the secret's
name or ARN) and AWS_REGION, and its service account a Pod Identity role allowed GetSecretValue on that secret alone
(infra/hub_token_access.py). boto3 finds the role's credentials through its container credential provider, which
reads the AWS_CONTAINER_CREDENTIALS_FULL_URI and AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE that EKS sets on a pod whose
service account has a Pod Identity association (AWS SDKs and Tools reference guide, "Container credential
provider"; EKS user guide, "Understand how EKS Pod Identity works"). The
launcher puts the token as HF_TOKEN (the variable huggingface_hub reads first, huggingface_hub/utils/_auth.py) into
the environment of the staging child alone, which downloads the model and the data set: torchrun's workers run
offline on what it staged and never hold the token (trainer/launch/launcher.py keep_token_from_workers).

A secret that cannot be read (missing, denied, not a string, empty) fails the job for good: no new pod would find it
any different, so the launcher exits EXIT_STAGING_FAILED before any download or rendezvous, naming the secret and
AWS's error code and message, never the token. Except at first: missing credentials and a denial are retried while a
fresh grant takes effect (aws_retry.py), for up to WAIT_SECONDS; a secret that does not exist is final at once.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from trainer.base.pod.aws_retry import DEFAULT_WAIT_SECONDS, AwsError, wait_seconds, with_retries

# What the pod's container is given (workloads/job/pod.py), and what the launcher sets.
SECRET_VARIABLE = "HF_TOKEN_SECRET"
REGION_VARIABLE = "AWS_REGION"
TOKEN_VARIABLE = "HF_TOKEN"
# How long a fresh pod waits for its credentials and grant to take effect before a denial counts; the variable
# overrides it (the tests set 0).
WAIT_SECONDS = DEFAULT_WAIT_SECONDS
WAIT_VARIABLE = "HF_TOKEN_SECRET_WAIT_SECONDS"


class HubTokenError(AwsError):
    """The secret could not be read; the message names the secret and AWS's error, never a secret value."""


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
        code = details.get("Code", "unknown error")
        raise HubTokenError(
            f"could not read the Hugging Face token from Secrets Manager secret {secret_id!r}: "
            f"{code}: {details.get('Message', 'no message')}",
            code,
            error.response.get("ResponseMetadata", {}).get("HTTPStatusCode"),
        ) from None
    except BotoCoreError as error:  # no credentials, no region, the endpoint unreachable
        raise HubTokenError(
            f"could not read the Hugging Face token from Secrets Manager secret {secret_id!r}: "
            f"{type(error).__name__}: {error}",
            type(error).__name__,
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
    if token.startswith("{"):
        # The console's default secret type is key/value, stored as a JSON object; sent as is, the hub would get
        # the whole object as the token and answer 401 for a reason no log would show.
        try:
            keys = sorted(json.loads(token))
        except (ValueError, TypeError):
            keys = []
        raise HubTokenError(
            f"Secrets Manager secret {secret_id!r} holds a JSON object (keys: {', '.join(map(str, keys)) or '?'}), "
            f"not the token; store the token as plain text: aws secretsmanager put-secret-value --secret-id "
            f"{secret_id} --secret-string hf_..."
        )
    return token


def read_with_retries(
    read: Callable[[], SecretRead],
    wait_seconds: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> SecretRead:
    """`read()`, retried while a fresh grant takes effect (aws_retry.py with_retries)."""
    return with_retries(read, wait_seconds, "trainer.launch", "reading the token's secret", sleep, clock)


def load_hub_token(environ: MutableMapping[str, str] | None = None) -> str | None:
    """When HF_TOKEN_SECRET names a secret, read it and set HF_TOKEN in `environ` (default: this process's
    environment, which the launcher's children inherit); returns the secret's id, or None when none is named.
    Raises HubTokenError when the secret cannot be read."""
    environ = os.environ if environ is None else environ
    secret_id = environ.get(SECRET_VARIABLE)
    if not secret_id:
        return None
    wait = wait_seconds(environ, WAIT_VARIABLE, WAIT_SECONDS)
    read = read_with_retries(lambda: _get_secret_value(secret_id, environ.get(REGION_VARIABLE)), wait)
    environ[TOKEN_VARIABLE] = token_from(read, secret_id)
    return secret_id
