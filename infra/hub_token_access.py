"""HubTokenAccess: the job's pods may read the one Secrets Manager secret that holds the Hugging Face token, and
nothing else.

A customer managed policy allowing secretsmanager:GetSecretValue on that secret (and kms:Decrypt only as Secrets
Manager decrypts that secret, for a secret under a customer managed key), a role that EKS Pod Identity may assume for
the job's service account alone (infra/iam.py pod_identity_trust_policy), the attachment, and the Pod Identity
association that maps the service account to the role. No inline policy: the deploy role may not write one
(ci/deploy_policy.py). The policy and the role live under IAM_PATH and carry the stack's tag, which is what the
deploy role may create and attach (stack/names.py).

The documents are pure functions of the secret and the account's partition, region and id; the component only wires
them to resources. It needs no data source beyond the partition and the caller's account, which need no IAM
permission.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.iam import PodIdentity, cluster_arn, pod_identity_trust_policy
from stack.hub_token_secret import secret_resource
from stack.names import IAM_PATH, STACK_TAG_KEY

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


@dataclass(frozen=True)
class HubTokenAccessArgs:
    secret: str  # job.hfTokenSecret: the secret's name or complete ARN
    identity: PodIdentity  # the job's namespace and service account
    cluster_name: str
    region: str
    stack: str
    # What the association needs first: the cluster, with its Pod Identity agent (the platform brings it along).
    depends_on: Sequence[pulumi.Resource] = ()


class HubTokenAccess(pulumi.ComponentResource):
    """The token secret's read policy and role, and the Pod Identity association of the job's service account."""

    role_arn: pulumi.Output[str]
    association: aws.eks.PodIdentityAssociation

    def __init__(self, name: str, args: HubTokenAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fsdp-eks:infra:HubTokenAccess", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        invoke = pulumi.InvokeOutputOptions(parent=self)
        partition = aws.get_partition_output(opts=invoke)
        account = aws.get_caller_identity_output(opts=invoke).account_id
        facts = pulumi.Output.all(partition.partition, partition.dns_suffix, account).apply(
            lambda v: AccountFacts(partition=v[0], dns_suffix=v[1], region=args.region, account=v[2])
        )
        tags = stack_tags(args.stack)
        policy = aws.iam.Policy(
            f"{name}-policy",
            path=IAM_PATH,
            description="Read the Hugging Face token secret of the training job",
            policy=facts.apply(lambda f: secret_read_policy(args.secret, f)),
            tags=tags,
            opts=child,
        )
        trust = facts.apply(
            lambda f: pod_identity_trust_policy(
                args.identity, cluster_arn(f.partition, f.region, f.account, args.cluster_name)
            )
        )
        role = aws.iam.Role(f"{name}-role", path=IAM_PATH, assume_role_policy=trust, tags=tags, opts=child)
        attachment = aws.iam.RolePolicyAttachment(
            f"{name}-attachment", role=role.name, policy_arn=policy.arn, opts=child
        )
        # The pods read the secret from their first start: the association exists, with its policy attached, before
        # the job (which depends on this component), and `pulumi destroy` removes it after the job.
        self.association = aws.eks.PodIdentityAssociation(
            f"{name}-association",
            cluster_name=args.cluster_name,
            namespace=args.identity.namespace,
            service_account=args.identity.service_account,
            role_arn=role.arn,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[attachment, *args.depends_on]),
        )
        self.role_arn = role.arn
        self.register_outputs({"roleArn": self.role_arn})
