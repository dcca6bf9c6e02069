"""ArtifactsBucket: the S3 bucket a stack creates for its runs' checkpoints and final models when artifacts.bucket
names none, made to outlive the stack.

Every resource here is registered with retain_on_delete: `pulumi destroy` drops it from the state and deletes nothing
in AWS (Pulumi docs, resource option retainOnDelete), so the checkpoints and models of every run stay, with their
versions; `force_destroy` stays false, so not even a replacement could empty the bucket. The user names the kept
bucket in artifacts.bucket to go on using it from this stack, after `up`, or from another (docs/job.md).

The bucket is private and encrypted, as the policy pack checks (policy/s3_buckets.py): all four public access blocks,
ACLs off (BucketOwnerEnforced), SSE-S3 by default, a policy that refuses requests without TLS. Versioning keeps an
overwritten or deleted object for NONCURRENT_VERSION_DAYS, after which the delete markers left alone are removed;
multipart uploads a writer left behind (a checkpoint cut short by a failure) are aborted after ABANDONED_UPLOAD_DAYS,
so their parts stop costing storage.

The policy documents are pure functions; the component only wires them to resources. Inputs and outputs are pulumi-aws
7.51.1's (pulumi_aws/s3/bucket.py and the bucket_* configuration resources beside it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.iam_scope import stack_tags
from stack.artifacts import CREATED_BUCKET_OUTPUT, REGION_OUTPUT, bucket_replacement_problem
from stack.fields import ConfigError
from stack.names import artifacts_bucket_prefix

# SSE-S3 rather than SSE-KMS: S3 encrypts every object with its own keys, so neither the pods' role nor the CI
# boundary needs a KMS grant, and checkpoints of many shards make no KMS requests (with the AWS managed key aws/s3,
# each PUT and GET calls KMS without a bucket key; Amazon S3 user guide, "Reducing the cost of SSE-KMS with Amazon S3
# Bucket Keys"). A customer managed key would need kms:Decrypt and kms:GenerateDataKey on it in every reader's and
# writer's policy.
SSE_ALGORITHM = "AES256"
# Every pruned checkpoint stays as noncurrent versions this long, billed as storage: a week to recover one deleted by
# mistake, not a month of a 70B run's optimizer states (about 1.1 TB a checkpoint).
NONCURRENT_VERSION_DAYS = 7
ABANDONED_UPLOAD_DAYS = 7
OBJECT_OWNERSHIP = "BucketOwnerEnforced"


def bucket_arn(partition: str, bucket: str) -> str:
    """An S3 bucket's ARN: no region or account (Amazon S3 user guide, "Policy resources for Amazon S3")."""
    return f"arn:{partition}:s3:::{bucket}"


def tls_only_policy(arn: str) -> str:
    """Deny every request to the bucket and its objects that does not come over TLS (Amazon S3 user guide, "Security
    best practices for Amazon S3": "Enforce encryption of data in transit", the aws:SecureTransport condition)."""
    statement = {
        "Sid": "DenyRequestsWithoutTls",
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3:*",
        "Resource": [arn, f"{arn}/*"],
        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
    }
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


def lifecycle_rules() -> list[aws.s3.BucketLifecycleConfigurationRuleArgsDict]:
    """One rule over the whole bucket (an empty filter; pulumi-aws s3.BucketLifecycleConfiguration docs, "Specifying
    an empty filter"): noncurrent versions expire, then the delete markers they leave (a delete marker with no
    noncurrent version left is "expired", and ExpiredObjectDeleteMarker removes it: Amazon S3 user guide, "Removing
    expired object delete markers"; without it every pruned checkpoint's 128+ markers stay, each listed by every
    ListObjectVersions), abandoned multipart uploads are aborted. Current objects stay: ExpiredObjectDeleteMarker
    takes no Days or Date beside it (S3 API reference, LifecycleExpiration)."""
    return [
        {
            "id": "expire-noncurrent-versions-and-abandoned-uploads",
            "status": "Enabled",
            "filter": {},
            "expiration": {"expired_object_delete_marker": True},
            "noncurrent_version_expiration": {"noncurrent_days": NONCURRENT_VERSION_DAYS},
            "abort_incomplete_multipart_upload": {"days_after_initiation": ABANDONED_UPLOAD_DAYS},
        }
    ]


def guard_created_bucket(stack: str, region: str) -> pulumi.Output[None]:
    """Fails the preview (and `up`) with a ConfigError when creating the stack's bucket would replace the one its
    last `up` created: a renamed stack, or another region. The stack reads its own outputs back through a
    StackReference to itself (a read, which a preview makes too; pulumi/pulumi#3722 shows the pattern), as nothing
    else in a program sees the state: the Pulumi engine replaces a bucket whose name prefix changed without a word, and
    retainOnDelete keeps the old one out of sight. The check is an apply, so the program waits for it (the Python
    SDK awaits every outstanding output and re-raises what it raised: pulumi/runtime/stack.py wait_for_rpcs)."""
    itself = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
    previous = pulumi.StackReference("previous-outputs", itself)

    def check(outputs: dict[str, object]) -> None:
        created, where = outputs.get(CREATED_BUCKET_OUTPUT), outputs.get(REGION_OUTPUT)
        problem = bucket_replacement_problem(
            created if isinstance(created, str) else None, where if isinstance(where, str) else None, stack, region
        )
        if problem:
            raise ConfigError([problem])

    return previous.outputs.apply(check)


@dataclass(frozen=True)
class ArtifactsBucketArgs:
    stack: str


class ArtifactsBucket(pulumi.ComponentResource):
    """The bucket and its versioning, encryption, public access block, ownership, lifecycle and TLS-only policy,
    every one retained on delete."""

    bucket_name: pulumi.Output[str]
    arn: pulumi.Output[str]

    def __init__(self, name: str, args: ArtifactsBucketArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fsdp-eks:infra:ArtifactsBucket", name, None, opts)
        kept = pulumi.ResourceOptions(parent=self, retain_on_delete=True)
        bucket = aws.s3.Bucket(
            name,
            # The provider adds a 26-character unique suffix to the prefix (BucketArgs.bucket_prefix); the CI deploy
            # role may create only buckets whose name starts with ARTIFACTS_BUCKET_PREFIX.
            bucket_prefix=artifacts_bucket_prefix(args.stack),
            force_destroy=False,
            tags=stack_tags(None, args.stack),
            opts=kept,
        )
        after_bucket = pulumi.ResourceOptions.merge(kept, pulumi.ResourceOptions(depends_on=[bucket]))
        name_of = bucket.bucket
        aws.s3.BucketVersioning(
            f"{name}-versioning", bucket=name_of, versioning_configuration={"status": "Enabled"}, opts=after_bucket
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-encryption",
            bucket=name_of,
            rules=[{"apply_server_side_encryption_by_default": {"sse_algorithm": SSE_ALGORITHM}}],
            opts=after_bucket,
        )
        public_access = aws.s3.BucketPublicAccessBlock(
            f"{name}-public-access",
            bucket=name_of,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=after_bucket,
        )
        aws.s3.BucketOwnershipControls(
            f"{name}-ownership", bucket=name_of, rule={"object_ownership": OBJECT_OWNERSHIP}, opts=after_bucket
        )
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-lifecycle", bucket=name_of, rules=lifecycle_rules(), opts=after_bucket
        )
        # After the public access block: S3 refuses concurrent changes to a bucket's policy and its public access
        # block (OperationAborted, "A conflicting conditional operation is currently in progress").
        aws.s3.BucketPolicy(
            f"{name}-tls-only",
            bucket=name_of,
            policy=bucket.arn.apply(tls_only_policy),
            opts=pulumi.ResourceOptions.merge(kept, pulumi.ResourceOptions(depends_on=[public_access])),
        )
        self.bucket_name = name_of
        self.arn = bucket.arn
        self.register_outputs({"bucketName": self.bucket_name, "arn": self.arn})
