"""Before any GPU work: can this run write its durable tier? Staging (trainer/stage.py) asks, once per pod.

Reading the bucket is not enough. A bucket the pods may list but not write (a bucket policy that denies PutObject, a
customer managed KMS key the role may not use), a bucket in another region, or a name with dots (the CRT client
addresses a bucket as a host name on AWS, and a dotted name fails TLS there) would let training run for hours and fail
only at its last checkpoint, each restart training again. So staging asks the two clients the run writes with:
- boto3 (the model's upload, meta.json, pruning): the bucket's region (GetBucketLocation), which must be the job's,
  as the connector signs for the job's region and does not follow S3's redirect to another;
- the S3 connector's CRT client (every checkpoint shard): a small object written and deleted under the run's prefix,
  and a HEAD of a key that does not exist under the run's checkpoints. DCP asks that of every save's `.metadata`
  before it writes (trainer/base/s3/dcp.py exists), and S3 answers it 404 only to a caller who may list the key; to any
  other it answers 403 (Amazon S3 API reference, HeadObject, "Permissions"), and every save fails. The pods' role
  lists only its run's prefix (infra/s3_access.py), so a role or bucket policy that narrows it further shows here.
Each failure is one line naming the URI and the error, which ends staging with exit 4 (final: no restart loop).
"""

from __future__ import annotations

import uuid

from trainer.base.s3.endpoint import region
from trainer.base.s3.run_layout import CHECKPOINT_DIRECTORY
from trainer.base.s3.transfer import S3Error, call
from trainer.base.s3.transfer import client as s3_client
from trainer.base.s3.uri import S3Uri
from trainer.checkpoint.layout import META_FILE

# GetBucketLocation answers no LocationConstraint for us-east-1 (Amazon S3 API reference, GetBucketLocation).
UNCONSTRAINED_REGION = "us-east-1"
PROBE_PREFIX = ".write-probe-"
ABSENT_PREFIX = ".absent-probe-"


def bucket_region(uri: S3Uri) -> str:
    answer = call(uri, lambda: s3_client().get_bucket_location(Bucket=uri.bucket))
    return answer.get("LocationConstraint") or UNCONSTRAINED_REGION


def probe_uri(artifacts: S3Uri) -> S3Uri:
    """A key of its own under the run's prefix, outside checkpoints/ and model/, which nothing else lists."""
    return artifacts.join(f"{PROBE_PREFIX}{uuid.uuid4().hex}")


def _crt_write(probe: S3Uri) -> None:
    from trainer.base.s3.dcp import connector_client  # torch: only where the run writes checkpoints

    try:
        writer = connector_client().put_object(probe.bucket, probe.key)
        writer.write(b"fsdp-eks: the run can write here")
        writer.close()
    except Exception as error:  # the connector's S3Exception and whatever the CRT raises: one line, with its words
        status = 403 if "Forbidden" in str(error) or "AccessDenied" in str(error) else None
        raise S3Error(
            f"{probe}: the S3 connector could not write: {' '.join(str(error).split())}", "", status
        ) from None


def absent_uri(artifacts: S3Uri) -> S3Uri:
    """A key under the run's checkpoints that nothing writes: where DCP's HEAD of `.metadata` goes."""
    return artifacts.join(CHECKPOINT_DIRECTORY, f"{ABSENT_PREFIX}{uuid.uuid4().hex}", META_FILE)


def _crt_head_absent(absent: S3Uri) -> None:
    from trainer.base.s3.dcp import exists  # torch: only where the run writes checkpoints

    try:
        found = exists(absent)
    except Exception as error:  # the connector's S3Exception: a denial, in the CRT's words
        said = " ".join(str(error).split())
        status = 403 if "Forbidden" in said or "AccessDenied" in said or "403" in said else None
        raise S3Error(
            f"{absent}: a HEAD of this missing key was answered {said!r} through the pods' credentials, not 'not "
            "found': S3 answers 404 only to a caller allowed to list the key (s3:ListBucket, s3:prefix under the "
            "run's prefix), and DCP makes that HEAD before every checkpoint save, which would fail; allow the pods' "
            "role to list the run's prefix",
            "",
            status,
        ) from None
    if found:
        raise S3Error(f"{absent}: a key that nothing writes exists; the checkpoints' existence check cannot be trusted")


def check_region(uri: S3Uri) -> None:
    """The connector reads and writes checkpoints only in the job's region; S3Error naming the URI otherwise."""
    where, ours = bucket_region(uri), region()
    if where != ours:
        raise S3Error(
            f"{uri}: the bucket is in {where}, the job in {ours}; the checkpoints' S3 client signs for the job's "
            "region: use a bucket in the stack's region"
        )


def check_artifacts(artifacts_uri: str) -> None:
    """The run's bucket is in the job's region, takes a write through the connector, and answers a HEAD of a missing
    key under the run's checkpoints with "not found"; S3Error (an InputError) naming the URI otherwise. The probe
    object is deleted again."""
    artifacts = S3Uri.parse(artifacts_uri, "--artifacts-uri")
    check_region(artifacts)
    probe = probe_uri(artifacts)
    call(probe, lambda: _crt_write(probe))
    call(probe, lambda: s3_client().delete_object(Bucket=probe.bucket, Key=probe.key))
    absent = absent_uri(artifacts)
    call(absent, lambda: _crt_head_absent(absent))
