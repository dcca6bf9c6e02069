"""Before any GPU work: can this run write its durable tier? Staging (trainer/stage.py) asks, once per pod.

Reading the bucket is not enough. A bucket the pods may list but not write (a bucket policy that denies PutObject, a
customer managed KMS key the role may not use), a bucket in another region, or a name with dots (the CRT client
addresses a bucket as a host name on AWS, and a dotted name fails TLS there) would let training run for hours and fail
only at its last checkpoint, each restart training again. So staging asks the two clients the run writes with:
- boto3 (the model's upload, meta.json, pruning): the bucket's region (GetBucketLocation), which must be the job's,
  as the connector signs for the job's region and does not follow S3's redirect to another;
- the S3 connector's CRT client (every checkpoint shard): a small object written and deleted under the run's prefix.
Each failure is one line naming the URI and the error, which ends staging with exit 4 (final: no restart loop).
"""

from __future__ import annotations

import uuid

from trainer.s3.endpoint import region
from trainer.s3.transfer import S3Error, call
from trainer.s3.transfer import client as s3_client
from trainer.s3.uri import S3Uri

# GetBucketLocation answers no LocationConstraint for us-east-1 (Amazon S3 API reference, GetBucketLocation).
UNCONSTRAINED_REGION = "us-east-1"
PROBE_PREFIX = ".write-probe-"


def bucket_region(uri: S3Uri) -> str:
    answer = call(uri, lambda: s3_client().get_bucket_location(Bucket=uri.bucket))
    return answer.get("LocationConstraint") or UNCONSTRAINED_REGION


def probe_uri(artifacts: S3Uri) -> S3Uri:
    """A key of its own under the run's prefix, outside checkpoints/ and model/, which nothing else lists."""
    return artifacts.join(f"{PROBE_PREFIX}{uuid.uuid4().hex}")


def _crt_write(probe: S3Uri) -> None:
    from trainer.s3.dcp import connector_client  # torch: only where the run writes checkpoints

    try:
        writer = connector_client().put_object(probe.bucket, probe.key)
        writer.write(b"fsdp-eks: the run can write here")
        writer.close()
    except Exception as error:  # the connector's S3Exception and whatever the CRT raises: one line, with its words
        status = 403 if "Forbidden" in str(error) or "AccessDenied" in str(error) else None
        raise S3Error(
            f"{probe}: the S3 connector could not write: {' '.join(str(error).split())}", "", status
        ) from None


def check_region(uri: S3Uri) -> None:
    """The connector reads and writes checkpoints only in the job's region; S3Error naming the URI otherwise."""
    where, ours = bucket_region(uri), region()
    if where != ours:
        raise S3Error(
            f"{uri}: the bucket is in {where}, the job in {ours}; the checkpoints' S3 client signs for the job's "
            "region: use a bucket in the stack's region"
        )


def check_artifacts(artifacts_uri: str) -> None:
    """The run's bucket is in the job's region and takes a write through the connector; S3Error (an InputError)
    naming the URI otherwise. The probe object is deleted again."""
    artifacts = S3Uri.parse(artifacts_uri, "--artifacts-uri")
    check_region(artifacts)
    probe = probe_uri(artifacts)
    call(probe, lambda: _crt_write(probe))
    call(probe, lambda: s3_client().delete_object(Bucket=probe.bucket, Key=probe.key))
