"""moto's S3 API with AWS's request signing and IAM checks on (INITIAL_NO_AUTH_ACTION_COUNT: the calls that make an
administrator are the only ones let through unchecked), and users allowed exactly the actions a test names: what a
pod's role may and may not do, against a real S3 API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from local.s3 import LocalS3

# The unchecked calls: CreateUser, PutUserPolicy and CreateAccessKey of the administrator.
SETUP_CALLS = 3


@dataclass(frozen=True)
class GuardedS3:
    server: LocalS3
    iam: Any  # the administrator's IAM client
    s3: Any  # the administrator's S3 client

    def user(self, name: str, actions: list[str]) -> dict[str, str]:
        """A user allowed `actions` on every resource (none: nothing); its keys as a process's environment."""
        self.iam.create_user(UserName=name)
        if actions:
            self.grant(name, actions)
        key = self.iam.create_access_key(UserName=name)["AccessKey"]
        return {"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}

    def grant(self, name: str, actions: list[str]) -> None:
        document = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}
        self.iam.put_user_policy(UserName=name, PolicyName="granted", PolicyDocument=json.dumps(document))


@contextmanager
def guarded_s3() -> Iterator[GuardedS3]:
    import boto3

    with LocalS3.start(server_env={"INITIAL_NO_AUTH_ACTION_COUNT": str(SETUP_CALLS)}) as server:
        where = {"endpoint_url": server.endpoint, "region_name": server.region}
        setup = boto3.client("iam", aws_access_key_id="setup", aws_secret_access_key="setup", **where)
        setup.create_user(UserName="admin")
        everything = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        setup.put_user_policy(UserName="admin", PolicyName="all", PolicyDocument=json.dumps(everything))
        admin = setup.create_access_key(UserName="admin")["AccessKey"]
        keys = {"aws_access_key_id": admin["AccessKeyId"], "aws_secret_access_key": admin["SecretAccessKey"]}
        yield GuardedS3(server, boto3.client("iam", **keys, **where), boto3.client("s3", **keys, **where))
