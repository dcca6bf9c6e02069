"""moto's S3 API with AWS's request signing and IAM checks on (INITIAL_NO_AUTH_ACTION_COUNT: the calls that make an
administrator are the only ones let through unchecked), and users allowed exactly the actions a test names, or a role
with the pods' own policy documents (infra/s3_access.py) assumed as Pod Identity would: what a pod's role may and may
not do, against a real S3 API. The server is tests/harness/s3_server.py with its IAM rules on: ListBucket's s3:prefix
condition and the 403 for a missing key the caller may not list, which moto alone leaves out."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from local.s3 import LocalS3
from tests.harness.s3_server import start_s3

# The unchecked calls: CreateUser, PutUserPolicy and CreateAccessKey of the administrator.
SETUP_CALLS = 3


@dataclass(frozen=True)
class GuardedS3:
    server: LocalS3
    iam: Any  # the administrator's IAM client
    s3: Any  # the administrator's S3 client
    sts: Any  # the administrator's STS client
    admin_arn: str

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

    def role_session(self, name: str, documents: list[str]) -> dict[str, str]:
        """A role with `documents` attached as customer managed policies (as infra/trainer_access.py attaches the
        pods'), assumed: its temporary credentials as a process's environment, as the Pod Identity agent hands a
        pod its role's."""
        trust = {"Effect": "Allow", "Principal": {"AWS": self.admin_arn}, "Action": "sts:AssumeRole"}
        role = self.iam.create_role(
            RoleName=name, AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [trust]})
        )["Role"]
        for index, document in enumerate(documents):
            arn = self.iam.create_policy(PolicyName=f"{name}-{index}", PolicyDocument=document)["Policy"]["Arn"]
            self.iam.attach_role_policy(RoleName=name, PolicyArn=arn)
        session = self.sts.assume_role(RoleArn=role["Arn"], RoleSessionName=name)["Credentials"]
        return {
            "AWS_ACCESS_KEY_ID": session["AccessKeyId"],
            "AWS_SECRET_ACCESS_KEY": session["SecretAccessKey"],
            "AWS_SESSION_TOKEN": session["SessionToken"],
        }


@contextmanager
def guarded_s3() -> Iterator[GuardedS3]:
    import boto3

    with start_s3(iam_rules=True, server_env={"INITIAL_NO_AUTH_ACTION_COUNT": str(SETUP_CALLS)}) as server:
        where = {"endpoint_url": server.endpoint, "region_name": server.region}
        setup = boto3.client("iam", aws_access_key_id="setup", aws_secret_access_key="setup", **where)
        admin_arn = setup.create_user(UserName="admin")["User"]["Arn"]
        everything = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        setup.put_user_policy(UserName="admin", PolicyName="all", PolicyDocument=json.dumps(everything))
        admin = setup.create_access_key(UserName="admin")["AccessKey"]
        keys = {"aws_access_key_id": admin["AccessKeyId"], "aws_secret_access_key": admin["SecretAccessKey"]}
        clients = [boto3.client(service, **keys, **where) for service in ("iam", "s3", "sts")]
        yield GuardedS3(server, *clients, admin_arn=admin_arn)
