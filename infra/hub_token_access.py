"""The job's pods may read the one Secrets Manager secret that holds the Hugging Face token, and nothing else: the
customer managed policy's document, allowing secretsmanager:GetSecretValue on that secret (and kms:Decrypt only as
Secrets Manager decrypts that secret, for a secret under a customer managed key). The pods' role, which carries it
beside their S3 access, is infra/trainer_access.py's TrainerAccess.

Pure functions of the secret and the account's partition, region and id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from stack.hub_token_secret import secret_resource
from stack.names import STACK_TAG_KEY

READ_ACTION = "secretsmanager:GetSecretValue"
DECRYPT_ACTION = "kms:Decrypt"


@dataclass(frozen=True)
class AccountFacts:
    """Where the stack runs: what the ARNs and the KMS condition are made of."""

    partition: str
    dns_suffix: str  # amazonaws.com, or amazonaws.com.cn in the China partition (aws.get_partition)
    region: str
    account: str


def secret_read_policy(secret: str, facts: AccountFacts) -> str:
    """GetSecretValue on the one secret, and kms:Decrypt only when Secrets Manager asks it for that secret.

    A secret under the AWS managed key aws/secretsmanager needs no KMS permission of the caller; one under a
    customer managed key needs kms:Decrypt on that key (Secrets Manager user guide, "Secret encryption and decryption
    in AWS Secrets Manager", Permissions for the KMS key). The key's ARN is not the stack's to know, so the grant is
    bounded instead by the conditions Secrets Manager's calls carry: kms:ViaService secretsmanager.REGION.SUFFIX, and
    the encryption context SecretARN, which Secrets Manager sets to the secret's ARN on every call (the same user
    guide, "Secrets Manager encryption context"; the AWS managed policy AWSSecretsManagerClientReadOnlyAccess
    conditions its kms:Decrypt on the same two keys). StringLike, because a secret named by its name is matched with
    `?` wildcards for its six random characters."""
    resource = secret_resource(secret, facts.partition, facts.region, facts.account)
    read = {"Sid": "ReadTheHubTokenSecret", "Effect": "Allow", "Action": READ_ACTION, "Resource": resource}
    decrypt = {
        "Sid": "DecryptTheHubTokenSecretThroughSecretsManager",
        "Effect": "Allow",
        "Action": DECRYPT_ACTION,
        "Resource": f"arn:{facts.partition}:kms:{facts.region}:*:key/*",
        "Condition": {
            "StringEquals": {"kms:ViaService": f"secretsmanager.{facts.region}.{facts.dns_suffix}"},
            "StringLike": {"kms:EncryptionContext:SecretARN": resource},
        },
    }
    return json.dumps({"Version": "2012-10-17", "Statement": [read, decrypt]})


def stack_tags(stack: str) -> dict[str, str]:
    """The tag that marks the policy and the role as this stack's (the deploy role's IAM grants are conditioned on
    it)."""
    return {STACK_TAG_KEY: stack}
