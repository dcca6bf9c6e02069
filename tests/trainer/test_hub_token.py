"""The launcher reads the Hugging Face token from AWS Secrets Manager into HF_TOKEN, which its workers inherit; a
secret it cannot read ends it with EXIT_STAGING_FAILED, naming the secret and AWS's error, never the token
(trainer/base/pod/hub_token.py, trainer/launch/launcher.py).

Against a real Secrets Manager API: moto's server on 127.0.0.1, with AWS's request signing and IAM checks on
(INITIAL_NO_AUTH_ACTION_COUNT: the first calls, which make an admin user, are the only ones without credentials).
The launcher reaches it through AWS_ENDPOINT_URL_SECRETS_MANAGER, as botocore's service-specific endpoint setting.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest

from local.s3 import LocalS3
from tests.harness.trainer_runs import ROOT
from tests.trainer.hub_token_probe import EXPECTED_DIGEST_VARIABLE, token_digest
from trainer.base.pod.exits import EXIT_STAGING_FAILED, REASON_PREFIX
from trainer.base.pod.hub_token import (
    REGION_VARIABLE,
    SECRET_VARIABLE,
    TOKEN_VARIABLE,
    WAIT_VARIABLE,
    HubTokenError,
    SecretRead,
    load_hub_token,
    read_with_retries,
    token_from,
)

REGION = "us-east-1"
TOKEN = "hf_" + "TokenForTheLaunchersTestsOnly0123"
SECRET = "fsdp-eks/hf-token"
BINARY_SECRET = "fsdp-eks/binary"
# admin user, its policy, its access key: the calls moto lets through before it checks every request.
SETUP_CALLS_WITHOUT_CREDENTIALS = 3
LAUNCH = ["--standalone", "--nnodes=1", "--nproc-per-node=1", "--max-restarts=0", "-m", "tests.trainer.hub_token_probe"]

# botocore's service-specific endpoint override for Secrets Manager (AWS SDKs and Tools reference guide,
# "Service-specific endpoints"; botocore configprovider.py builds AWS_ENDPOINT_URL_<SERVICE ID>): these tests point
# the launcher at a local Secrets Manager with it; nothing in the pod sets it.
ENDPOINT_VARIABLE = "AWS_ENDPOINT_URL_SECRETS_MANAGER"


@dataclass(frozen=True)
class Keys:
    access_key_id: str
    secret_access_key: str


@dataclass(frozen=True)
class SecretsManager:
    endpoint: str
    reader: Keys  # may call GetSecretValue
    outsider: Keys  # may call nothing
    iam: Any  # an administrator's IAM client, to grant a user more while a launcher waits


def _client(service: str, endpoint: str, keys: Keys | None = None) -> Any:
    keys = keys or Keys("testing", "testing")
    return boto3.client(
        service,
        region_name=REGION,
        endpoint_url=endpoint,
        aws_access_key_id=keys.access_key_id,
        aws_secret_access_key=keys.secret_access_key,
    )


def _user(iam: Any, name: str, actions: list[str]) -> Keys:
    iam.create_user(UserName=name)
    if actions:
        statement = {"Effect": "Allow", "Action": actions, "Resource": "*"}
        document = json.dumps({"Version": "2012-10-17", "Statement": [statement]})
        iam.put_user_policy(UserName=name, PolicyName=f"{name}-policy", PolicyDocument=document)
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return Keys(key["AccessKeyId"], key["SecretAccessKey"])


@pytest.fixture(scope="module")
def secrets_manager() -> Iterator[SecretsManager]:
    """moto's server with the token's secret, a binary secret, a reader and an outsider; stopped afterwards."""
    # The local run's moto server (local/s3.py), which serves Secrets Manager and IAM as well as S3.
    with LocalS3.start(server_env={"INITIAL_NO_AUTH_ACTION_COUNT": str(SETUP_CALLS_WITHOUT_CREDENTIALS)}) as server:
        endpoint = server.endpoint
        admin = _user(_client("iam", endpoint), "admin", ["*"])
        iam = _client("iam", endpoint, admin)
        secrets = _client("secretsmanager", endpoint, admin)
        secrets.create_secret(Name=SECRET, SecretString=TOKEN + "\n")
        secrets.create_secret(Name=BINARY_SECRET, SecretBinary=b"\x00\x01")
        yield SecretsManager(
            endpoint,
            reader=_user(iam, "reader", ["secretsmanager:GetSecretValue"]),
            outsider=_user(iam, "outsider", []),
            iam=iam,
        )


def launcher_env(manager: SecretsManager, keys: Keys, secret: str, wait_seconds: float = 0) -> dict[str, str]:
    """What the pod gives the launcher (HF_TOKEN_SECRET, AWS_REGION), credentials standing in for the Pod Identity
    role's, and the local endpoint; nothing of this machine's own AWS or Hugging Face settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "HF_")) and k != TOKEN_VARIABLE}
    return env | {
        SECRET_VARIABLE: secret,
        REGION_VARIABLE: REGION,
        ENDPOINT_VARIABLE: manager.endpoint,
        "AWS_ACCESS_KEY_ID": keys.access_key_id,
        "AWS_SECRET_ACCESS_KEY": keys.secret_access_key,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        EXPECTED_DIGEST_VARIABLE: token_digest(TOKEN),
        WAIT_VARIABLE: str(wait_seconds),
    }


def launch(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainer.launch", *LAUNCH],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def last_line(result: subprocess.CompletedProcess[str]) -> str:
    return result.stderr.strip().splitlines()[-1]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_workers_inherit_the_token_the_launcher_read(secrets_manager: SecretsManager) -> None:
    # The secret holds the token and a trailing newline (`--secret-string "$(cat file)"`); the probe checks the
    # digest of the token alone, so the launcher stripped it.
    result = launch(launcher_env(secrets_manager, secrets_manager.reader, SECRET))
    assert result.returncode == 0, result.stderr
    assert "hub_token_probe: HF_TOKEN is the expected token" in result.stderr
    assert TOKEN not in result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_missing_secret_fails_the_job_once_naming_the_secret_and_the_aws_error(
    secrets_manager: SecretsManager,
) -> None:
    result = launch(launcher_env(secrets_manager, secrets_manager.reader, "fsdp-eks/no-such-token"))
    assert result.returncode == EXIT_STAGING_FAILED
    line = last_line(result)
    assert line.startswith(f"{REASON_PREFIX}exit {EXIT_STAGING_FAILED} (staging failed), permanent")
    assert "'fsdp-eks/no-such-token'" in line and "ResourceNotFoundException" in line
    assert "hub_token_probe" not in result.stderr  # no worker started


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_missing_secret_is_final_at_once_however_long_the_pod_may_wait(secrets_manager: SecretsManager) -> None:
    started = time.monotonic()
    result = launch(launcher_env(secrets_manager, secrets_manager.reader, "fsdp-eks/no-such-token", wait_seconds=60))
    assert result.returncode == EXIT_STAGING_FAILED and "retry" not in result.stderr
    assert time.monotonic() - started < 60


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_grant_that_takes_effect_after_the_pod_starts_is_waited_for(secrets_manager: SecretsManager) -> None:
    """The stack creates the role, its policy and the Pod Identity association just before the job; until IAM has
    caught up the read is denied. The launcher retries, and the job starts once the grant is in effect."""
    iam = secrets_manager.iam
    late = _user(iam, "late-reader", [])
    launcher = subprocess.Popen(
        [sys.executable, "-m", "trainer.launch", *LAUNCH],
        cwd=ROOT,
        env=launcher_env(secrets_manager, late, SECRET, wait_seconds=90),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Granted only once the launcher has been denied and said it retries: a fixed sleep lost that race whenever
        # the launcher's start took longer than the sleep.
        assert launcher.stderr is not None
        before_grant = []
        for line in launcher.stderr:
            before_grant.append(line)
            if "reading the token's secret; retry in" in line:
                break
        document = {"Version": "2012-10-17", "Statement": [READ_STATEMENT]}
        iam.put_user_policy(UserName="late-reader", PolicyName="read", PolicyDocument=json.dumps(document))
        stdout, after_grant = launcher.communicate(timeout=240)
        stderr = "".join(before_grant) + after_grant
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert launcher.returncode == 0, stderr
    assert "reading the token's secret; retry in" in stderr
    assert "hub_token_probe: HF_TOKEN is the expected token" in stderr
    assert TOKEN not in stdout + stderr


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_denied_read_fails_the_job_once_without_showing_the_token(secrets_manager: SecretsManager) -> None:
    # Denied for longer than the pod waits for a fresh grant (3 s here): one retry, then the job fails once.
    result = launch(launcher_env(secrets_manager, secrets_manager.outsider, SECRET, wait_seconds=3))
    assert result.returncode == EXIT_STAGING_FAILED
    assert "reading the token's secret; retry in 2 s" in result.stderr
    line = last_line(result)
    assert f"'{SECRET}'" in line and "AccessDenied" in line
    assert TOKEN not in result.stdout + result.stderr
    assert "hub_token_probe" not in result.stderr


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_binary_secret_fails_the_job_once_naming_it(secrets_manager: SecretsManager) -> None:
    result = launch(launcher_env(secrets_manager, secrets_manager.reader, BINARY_SECRET))
    assert result.returncode == EXIT_STAGING_FAILED
    assert f"'{BINARY_SECRET}' holds no SecretString" in last_line(result)


READ_STATEMENT = {"Effect": "Allow", "Action": ["secretsmanager:GetSecretValue"], "Resource": "*"}


class FakeClock:
    def __init__(self) -> None:
        self.now, self.slept = 0.0, []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def failing_then(errors: list[HubTokenError]) -> Any:
    def read() -> SecretRead:
        if errors:
            raise errors.pop(0)
        return SecretRead(TOKEN)

    return read


def test_a_fresh_grant_is_retried_with_backoff_until_it_takes_effect() -> None:
    clock = FakeClock()
    errors = [HubTokenError("denied", "AccessDeniedException"), HubTokenError("none yet", "NoCredentialsError")] * 2
    read = read_with_retries(failing_then(errors), wait_seconds=120, sleep=clock.sleep, clock=lambda: clock.now)
    assert read == SecretRead(TOKEN) and clock.slept == [2, 4, 8, 16]


def test_a_denial_past_the_wait_counts() -> None:
    clock = FakeClock()
    errors = [HubTokenError("denied", "AccessDeniedException")] * 20
    with pytest.raises(HubTokenError, match="denied"):
        read_with_retries(failing_then(errors), wait_seconds=60, sleep=clock.sleep, clock=lambda: clock.now)
    assert clock.slept == [2, 4, 8, 16, 30] and sum(clock.slept) <= 60


def test_a_missing_secret_is_not_retried() -> None:
    clock = FakeClock()
    with pytest.raises(HubTokenError):
        read_with_retries(
            failing_then([HubTokenError("gone", "ResourceNotFoundException")]),
            wait_seconds=120,
            sleep=clock.sleep,
            clock=lambda: clock.now,
        )
    assert clock.slept == []


def test_a_key_value_secret_is_refused_naming_its_keys_not_its_values() -> None:
    """The console stores a key/value secret as a JSON object; sent to the hub as is, it would be a 401 for a reason
    no log shows."""
    with pytest.raises(HubTokenError, match="JSON object") as refused:
        token_from(SecretRead(json.dumps({"HF_TOKEN": TOKEN})), SECRET)
    assert "HF_TOKEN" in str(refused.value) and TOKEN not in str(refused.value)


def test_an_empty_secret_string_is_refused() -> None:
    with pytest.raises(HubTokenError, match="empty SecretString"):
        token_from(SecretRead(" \n"), SECRET)


def test_without_a_named_secret_nothing_is_read_or_set() -> None:
    environ = {"PATH": "/bin"}
    assert load_hub_token(environ) is None and environ == {"PATH": "/bin"}
