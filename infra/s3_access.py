"""What the job's pods may do in S3: write their own run in the artifacts bucket, and read the s3:// inputs
(job.dataset, job.model, job.resumeFrom, another run's checkpoints) exactly where they are, never write them.

Pure policy documents of the partition, the bucket and key prefixes. The actions are the ones the trainer's S3 clients
call (trainer/base/s3/, the S3 connector's DCP writer and reader): GetObject, PutObject and the multipart upload calls,
and ListBucket to find a run's checkpoints; DeleteObject prunes old checkpoints. Object-level actions are granted on
`bucket/key` ARNs, ListBucket on the bucket with an s3:prefix condition (Amazon S3 user guide, "Policy resources for
Amazon S3", and the service authorization reference's condition keys for ListBucket).

Scopes, narrow on purpose:
- writes (PutObject, DeleteObject, the multipart calls) under `<prefix>/<stack>/run-<n>/` alone (stack/artifacts.py
  run_key, which ends in "/"): a bug in one run cannot delete another run's checkpoints or model;
- ListBucket with s3:prefix under the same run. It decides more than listings: a HEAD or GET of a key that does not
  exist answers 404 only to a caller allowed to list it, 403 to any other (Amazon S3 API reference, HeadObject,
  "Permissions"), and S3 judges that with the key as s3:prefix. Every DCP save HEADs its missing `.metadata` first
  (torch FileSystemWriter.prepare_local_plan), and staging checks that the pods' own credentials get that 404
  (trainer/checkpoint/durable_preflight.py);
- an input's key exactly: `key` and `key/*` (a prefix given with its "/" is `key*` already), never `key*`, which for
  s3://b/data would open s3://b/data-private/ too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from infra.artifacts import bucket_arn
from trainer.base.s3.uri import S3Uri

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


def input_patterns(key: str) -> list[str]:
    """The key patterns an input's `key` stands for, nothing beyond: the object or directory `key` and what is below
    it; for a prefix that ends in "/", what is below it; for the whole bucket (""), everything."""
    if not key:
        return ["*"]
    if key.endswith("/"):
        return [f"{key}*"]
    return [key, f"{key}/*"]


def artifacts_policy(partition: str, bucket: str, run_key: str) -> str:
    """Read and write the objects under `run_key` (<prefix>/<stack>/run-<n>/, stack/artifacts.py run_key, ending in
    "/") of `bucket`, list only that prefix, and find the bucket's region."""
    if not run_key.endswith("/"):
        raise ValueError(f"{run_key!r}: a run's key prefix ends in '/' (run-1 would match run-10)")
    arn = bucket_arn(partition, bucket)
    return _document(
        [
            {
                "Sid": "ReadAndWriteTheRun",
                "Effect": "Allow",
                "Action": list(WRITE_ACTIONS),
                "Resource": f"{arn}/{run_key}*",
            },
            {
                "Sid": "ListTheRun",
                "Effect": "Allow",
                "Action": LIST_ACTION,
                "Resource": arn,
                "Condition": {"StringLike": {"s3:prefix": [f"{run_key}*"]}},
            },
            {"Sid": "FindTheBucketsRegion", "Effect": "Allow", "Action": LOCATION_ACTION, "Resource": arn},
        ]
    )


def read_only_policy(partition: str, uris: Sequence[S3Uri]) -> str:
    """GetObject on each input's key exactly (input_patterns: an object, or every object under a directory, as a
    data set or a checkpoint directory may be either) and ListBucket of the same keys, nothing else."""
    statements: list[dict[str, Any]] = []
    for index, uri in enumerate(uris):
        arn = bucket_arn(partition, uri.bucket)
        patterns = input_patterns(uri.key)
        statements += [
            {
                "Sid": f"ReadInput{index}",
                "Effect": "Allow",
                "Action": list(READ_ACTIONS),
                "Resource": [f"{arn}/{pattern}" for pattern in patterns],
            },
            {
                "Sid": f"ListInput{index}",
                "Effect": "Allow",
                "Action": LIST_ACTION,
                "Resource": arn,
                "Condition": {"StringLike": {"s3:prefix": patterns}},
            },
        ]
    return _document(statements)


def inputs_outside(uris: Sequence[str], bucket: str | None, run_key: str) -> list[S3Uri]:
    """The s3:// inputs the artifacts policy does not already cover: every one outside `run_key` of `bucket` (another
    run's checkpoints too; all of them while the bucket's name is not known), each once."""
    found: list[S3Uri] = []
    for value in uris:
        uri = S3Uri.parse(value, "input")
        inside = uri.bucket == bucket and uri.key.startswith(run_key)
        if not inside and uri not in found:
            found.append(uri)
    return found
