"""What the job's pods may do in S3: write their own stack's runs in the artifacts bucket, and read the s3:// inputs
(job.dataset, job.model, job.resumeFrom) that live anywhere else, never write them.

Pure policy documents of the partition, the bucket and key prefixes. The actions are the ones the trainer's S3 clients
call (trainer/s3/, the S3 connector's DCP writer and reader): GetObject, PutObject and the multipart upload calls, and
ListBucket to find a run's checkpoints; DeleteObject prunes old checkpoints. Object-level actions are granted on
`bucket/key*` ARNs, ListBucket on the bucket with an s3:prefix condition (Amazon S3 user guide, "Policy resources for
Amazon S3", and the service authorization reference's condition keys for ListBucket).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from infra.artifacts import bucket_arn
from trainer.s3.uri import S3Uri

WRITE_ACTIONS = (
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
)
READ_ACTIONS = ("s3:GetObject",)
LIST_ACTION = "s3:ListBucket"
LOCATION_ACTION = "s3:GetBucketLocation"


def _document(statements: list[dict[str, Any]]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


def artifacts_policy(partition: str, bucket: str, stack_key: str) -> str:
    """Read and write the objects under `stack_key` (<prefix>/<stack>/, stack/artifacts.py) of `bucket`, list only
    that prefix, and find the bucket's region."""
    arn = bucket_arn(partition, bucket)
    return _document(
        [
            {
                "Sid": "ReadAndWriteTheStacksRuns",
                "Effect": "Allow",
                "Action": list(WRITE_ACTIONS),
                "Resource": f"{arn}/{stack_key}*",
            },
            {
                "Sid": "ListTheStacksRuns",
                "Effect": "Allow",
                "Action": LIST_ACTION,
                "Resource": arn,
                "Condition": {"StringLike": {"s3:prefix": [stack_key, f"{stack_key}*"]}},
            },
            {"Sid": "FindTheBucketsRegion", "Effect": "Allow", "Action": LOCATION_ACTION, "Resource": arn},
        ]
    )


def read_only_policy(partition: str, uris: Sequence[S3Uri]) -> str:
    """GetObject on each input's key (an object, or every object under a prefix: `key*` covers both, as a data set
    or a checkpoint directory may be either) and ListBucket of that key, nothing else."""
    statements: list[dict[str, Any]] = []
    for index, uri in enumerate(uris):
        arn = bucket_arn(partition, uri.bucket)
        statements += [
            {
                "Sid": f"ReadInput{index}",
                "Effect": "Allow",
                "Action": list(READ_ACTIONS),
                "Resource": f"{arn}/{uri.key}*",
            },
            {
                "Sid": f"ListInput{index}",
                "Effect": "Allow",
                "Action": LIST_ACTION,
                "Resource": arn,
                "Condition": {"StringLike": {"s3:prefix": [uri.key, f"{uri.key}*"]}},
            },
        ]
    return _document(statements)


def inputs_outside(uris: Sequence[str], bucket: str | None, stack_key: str) -> list[S3Uri]:
    """The s3:// inputs the artifacts policy does not already cover: every one outside `stack_key` of `bucket`
    (all of them while the bucket's name is not known), each once."""
    found: list[S3Uri] = []
    for value in uris:
        uri = S3Uri.parse(value, "input")
        inside = uri.bucket == bucket and uri.key.startswith(stack_key)
        if not inside and uri not in found:
            found.append(uri)
    return found
