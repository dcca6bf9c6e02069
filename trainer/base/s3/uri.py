"""s3:// URIs: parsed once, joined without doubled slashes, printed back as given.

    S3Uri.parse("s3://bucket/runs/dev/run-1/").join("model")  ->  s3://bucket/runs/dev/run-1/model

A key that ends with "/" (or an empty key) names a prefix; `join` always treats the URI as a prefix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainer.base.errors import InputError

SCHEME = "s3://"
# S3's bucket naming rules (general purpose buckets): 3-63 characters, lowercase letters, digits, dots and hyphens,
# beginning and ending with a letter or digit (Amazon S3 user guide, "Bucket naming rules").
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def is_s3_uri(value: str | None) -> bool:
    return bool(value) and str(value).startswith(SCHEME)


def bucket_name_problem(bucket: str) -> str | None:
    """Why `bucket` is not a valid S3 bucket name, or None."""
    if not _BUCKET.match(bucket) or ".." in bucket:
        return (
            f"{bucket!r} is not a valid S3 bucket name (3-63 lowercase letters, digits, dots and hyphens, beginning "
            "and ending with a letter or digit)"
        )
    return None


def checkpoint_bucket_problem(bucket: str) -> str | None:
    """Why checkpoints cannot be written to or read from `bucket`, a valid name, or None. The S3 connector's CRT
    client addresses a bucket on AWS as a host name (virtual-hosted style, trainer/base/s3/endpoint.py), and a name with
    dots does not match S3's TLS certificate (*.s3.<region>.amazonaws.com covers one label); boto3 would cope, so
    everything but the checkpoints would work."""
    if "." in bucket:
        return f"{bucket!r} has dots, which the checkpoints' S3 client cannot reach over TLS: use a bucket without dots"
    return None


@dataclass(frozen=True)
class S3Uri:
    bucket: str
    key: str = ""
    """The object key or prefix, without a leading slash; "" for the whole bucket."""

    @classmethod
    def parse(cls, value: str, flag: str = "s3 URI") -> S3Uri:
        """Parse `s3://bucket[/key]`; an InputError naming `flag` and the value otherwise."""
        if not is_s3_uri(value):
            raise InputError(f"{flag} {value}: not an s3:// URI")
        bucket, _, key = value[len(SCHEME) :].partition("/")
        problem = bucket_name_problem(bucket)
        if problem:
            raise InputError(f"{flag} {value}: {problem}")
        if "//" in key or key.startswith("/"):
            raise InputError(f"{flag} {value}: the key has an empty path segment ('//')")
        return cls(bucket, key)

    @property
    def prefix(self) -> str:
        """The key as a prefix: "" or ending in "/"."""
        return self.key if not self.key or self.key.endswith("/") else self.key + "/"

    def join(self, *parts: str) -> S3Uri:
        """This URI as a prefix, with `parts` below it."""
        tail = "/".join(part.strip("/") for part in parts if part.strip("/"))
        return S3Uri(self.bucket, self.prefix + tail)

    @property
    def name(self) -> str:
        """The last segment of the key ("" for a bucket)."""
        return self.key.rstrip("/").rpartition("/")[2]

    def __str__(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.key}" if self.key else f"{SCHEME}{self.bucket}"
