"""Where a stack's runs keep their artifacts in S3 (`<prefix>/<stack>/run-<n>/`), the prefix's check, and
`--artifacts-uri` as the pods get it. Below a run, the checkpoints, the final model and the record sit as
trainer/base/s3/run_layout.py says. One place for the keys that the job's flags, the pods' IAM policy and the stack's
outputs share.

Pure and torch-free.
"""

from __future__ import annotations

import re

from stack.names import ARTIFACTS_BUCKET_VARIABLE, artifacts_bucket_prefix
from trainer.base.s3.run_layout import MODEL_DIRECTORY
from trainer.base.s3.uri import S3Uri

DEFAULT_PREFIX = "fsdp-eks"
# Key prefixes made of S3's "safe characters" (Amazon S3 user guide, "Naming Amazon S3 objects": letters, digits and
# ! - _ . * ' ( )), here without the ones a shell or an IAM policy would read as something else (* is an IAM wildcard),
# in segments joined by single slashes, with no slash at either end.
_PREFIX = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$")
# The stack's outputs that say which bucket it created and where (__main__.py exports them; a preview reads the last
# `up`'s back, infra/artifacts.py guard_created_bucket).
CREATED_BUCKET_OUTPUT = "createdArtifactsBucket"
REGION_OUTPUT = "region"


def prefix_problem(prefix: str) -> str | None:
    """Why `prefix` cannot be artifacts.prefix, or None."""
    if _PREFIX.match(prefix) and ".." not in prefix.split("/") and "." not in prefix.split("/"):
        return None
    return (
        "a key prefix of letters, digits, '-', '_' and '.' in segments joined by single '/', without a '/' at either "
        "end, such as fsdp-eks or teams/ml/fsdp-eks"
    )


def stack_key(prefix: str, stack: str) -> str:
    """Every run of the stack lives under this key prefix (ends with '/'): the pods' write access is scoped to it."""
    return f"{prefix}/{stack}/"


def run_key(prefix: str, stack: str, run: int) -> str:
    """The key prefix of one run (ends with '/')."""
    return f"{stack_key(prefix, stack)}run-{run}/"


def run_uri(bucket: str, prefix: str, stack: str, run: int) -> S3Uri:
    """The run's artifacts in `bucket`, as a prefix URI (s3://bucket/prefix/stack/run-n/)."""
    return S3Uri(bucket, run_key(prefix, stack, run))


def bucket_reference() -> str:
    """The bucket as the pod's flags name it: a reference to the container's variable, which Kubernetes expands."""
    return f"$({ARTIFACTS_BUCKET_VARIABLE})"


def artifacts_flag(prefix: str, stack: str, run: int) -> str:
    """--artifacts-uri as the job's pods get it, known at preview whether or not the bucket exists yet:
    s3://$(FSDP_EKS_ARTIFACTS_BUCKET)/<prefix>/<stack>/run-<n> (no trailing '/': the trainer joins below it)."""
    return f"s3://{bucket_reference()}/{run_key(prefix, stack, run).rstrip('/')}"


def model_uri(run: S3Uri) -> S3Uri:
    """The final model of a run, a directory of safetensors and config in Hugging Face format."""
    return run.join(MODEL_DIRECTORY)


def bucket_replacement_problem(created: str | None, created_region: str | None, stack: str, region: str) -> str | None:
    """Why creating the stack's bucket now would replace the one its last `up` created (`created`, in
    `created_region`), or None. The bucket's inputs that force a new bucket: its name's prefix, made from the stack's
    name (a renamed stack gets another), and its region (pulumi-aws 7: a bucket's `region` defaults to the provider's,
    aws:region). A replacement would create an empty bucket and drop the old one, every run's checkpoints and
    models in it, from the stack (retainOnDelete keeps it in AWS): the runs would start over."""
    if not created:
        return None
    reasons = []
    if not created.startswith(artifacts_bucket_prefix(stack)):
        reasons.append(f"its name does not start with {artifacts_bucket_prefix(stack)!r}, the stack's now (renamed?)")
    if created_region and created_region != region:
        reasons.append(f"it is in {created_region} and the stack now in {region}")
    if not reasons:
        return None
    keep = (
        f"to go on with it, name it: pulumi config set --path fsdp-eks:artifacts.bucket {created}"
        if not created_region or created_region == region
        else f"name a bucket in {region} in fsdp-eks:artifacts.bucket (copy what you need from {created} first)"
    )
    return (
        f"fsdp-eks:artifacts.bucket: unset, and this stack created {created} before, which this change would replace "
        f"({'; '.join(reasons)}): pulumi up would create a new, empty bucket and leave {created}, with every run's "
        f"checkpoints and models, outside the stack; {keep}"
    )
