"""boto3 for the run's whole objects: list a prefix, describe and download objects, upload a directory.

    objects = list_objects(S3Uri.parse("s3://data/dialogues/"))        # every object under the prefix, in key order
    download(S3Uri("data", "dialogues/a.jsonl"), Path("/fsx/a.jsonl"))
    upload_directory(Path("/tmp/model"), S3Uri.parse("s3://artifacts/runs/dev/run-1/model/"))

Checkpoints go through the S3 connector for PyTorch instead (trainer/base/s3/dcp.py); this is for files read or written
whole: the data set and the model in, the exported model out.

Every AWS failure becomes one S3Error line naming the s3:// URI and AWS's error code and message
("s3://data/x.jsonl: NoSuchKey: The specified key does not exist."): an InputError, so staging exits
EXIT_STAGING_FAILED with it as the launcher's reason, and an AwsError, so a denial while a fresh Pod Identity grant
takes effect is retried (trainer/base/pod/aws_retry.py) for up to WAIT_SECONDS (WAIT_VARIABLE overrides it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from trainer.base.errors import InputError
from trainer.base.pod.aws_retry import DEFAULT_WAIT_SECONDS, AwsError, wait_seconds, with_retries
from trainer.base.s3.endpoint import endpoint_url, force_path_style, region
from trainer.base.s3.limits import BOTOCORE_MAX_ATTEMPTS, PART_BYTES
from trainer.base.s3.uri import S3Uri

WAIT_SECONDS = DEFAULT_WAIT_SECONDS
WAIT_VARIABLE = "S3_GRANT_WAIT_SECONDS"
PROGRAM = "trainer.s3"

T = TypeVar("T")


class S3Error(AwsError, InputError):
    """An S3 call that failed, in one line naming the URI and AWS's error."""


@dataclass(frozen=True)
class S3Object:
    key: str
    size: int
    etag: str
    """As S3 reports it (quoted); it changes whenever the object's content is written again."""


def client() -> Any:
    """A boto3 S3 client for this run's endpoint and region (trainer/base/s3/endpoint.py); credentials from the usual
    chain
    (the Pod Identity agent in a pod, AWS_ACCESS_KEY_ID locally)."""
    import boto3
    from botocore.config import Config

    config = Config(
        s3={"addressing_style": "path" if force_path_style() else "auto"},
        retries=retry_settings(os.environ),
        # The endpoint is endpoint.py's answer, the connector's too: no other configured one (a profile's).
        ignore_configured_endpoint_urls=True,
    )
    return boto3.client("s3", endpoint_url=endpoint_url(), region_name=region(), config=config)


def retry_settings(environ: Mapping[str, str]) -> dict[str, Any]:
    """Throttling (SlowDown), 5xx and lost connections retried by botocore itself, with backoff, for as long as
    limits.py sizes. AWS_MAX_ATTEMPTS, when set, rules instead, as it does the connector's client. A count set in
    code hides the variable from botocore (botocore/args.py _compute_retry_max_attempts), so it is read here."""
    attempts = environ.get("AWS_MAX_ATTEMPTS")
    return {"mode": "standard", "total_max_attempts": int(attempts) if attempts else BOTOCORE_MAX_ATTEMPTS}


def _transfer_config() -> Any:
    from boto3.s3.transfer import TransferConfig

    # The classic transfer manager on every instance: boto3 switches to the CRT one on instances it deems optimised
    # (boto3/s3/transfer.py _should_use_crt, e.g. p4d, p5), whose failures are not ClientErrors. Multipart in parts of
    # limits.py's PART_BYTES (the manager's default is 8 MiB), 10 threads (its default).
    return TransferConfig(
        preferred_transfer_client="classic", multipart_threshold=PART_BYTES, multipart_chunksize=PART_BYTES
    )


def s3_error(uri: S3Uri | str, error: BaseException) -> S3Error:
    """The failure of a call on `uri`, in AWS's words."""
    from boto3.exceptions import S3UploadFailedError
    from botocore.exceptions import ClientError

    if isinstance(error, S3UploadFailedError) and isinstance(error.__context__, ClientError):
        error = error.__context__  # boto3's upload_file wraps the ClientError in a message of its own
    if isinstance(error, ClientError):
        details = error.response.get("Error", {})
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        code = str(details.get("Code") or "unknown error")
        return S3Error(f"{uri}: {code}: {details.get('Message') or 'no message'}", code, status)
    return S3Error(f"{uri}: {type(error).__name__}: {error}", type(error).__name__)


def call(uri: S3Uri | str, action: Callable[[], T]) -> T:
    """`action()`, its AWS failure an S3Error naming `uri`; a denial retried while a fresh grant takes effect."""
    from boto3.exceptions import Boto3Error
    from botocore.exceptions import BotoCoreError, ClientError

    def once() -> T:
        try:
            return action()
        except (ClientError, BotoCoreError, Boto3Error) as error:
            raise s3_error(uri, error) from None

    return with_retries(once, wait_seconds(os.environ, WAIT_VARIABLE, WAIT_SECONDS), PROGRAM, f"on {uri}")


def list_objects(uri: S3Uri, s3: Any = None) -> list[S3Object]:
    """Every object whose key starts with `uri`'s key, in key order (ListObjectsV2 returns keys in UTF-8 binary
    order, Amazon S3 API reference); directory markers (keys ending in "/") left out."""
    s3 = s3 or client()

    def pages() -> list[S3Object]:
        found = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=uri.bucket, Prefix=uri.key):
            for item in page.get("Contents", []):
                if not item["Key"].endswith("/"):
                    found.append(S3Object(item["Key"], int(item["Size"]), str(item["ETag"])))
        return found

    return sorted(call(uri, pages), key=lambda item: item.key)


def describe(uri: S3Uri, s3: Any = None) -> S3Object:
    """One object's size and ETag. A GET whose body is not read: unlike HEAD, which has no body, its error names
    AWS's code and message (NoSuchKey, NoSuchBucket, AccessDenied)."""
    s3 = s3 or client()

    def get() -> S3Object:
        answer = s3.get_object(Bucket=uri.bucket, Key=uri.key)
        answer["Body"].close()
        return S3Object(uri.key, int(answer["ContentLength"]), str(answer["ETag"]))

    return call(uri, get)


def read_text(uri: S3Uri, s3: Any = None) -> str:
    s3 = s3 or client()
    return call(uri, lambda: s3.get_object(Bucket=uri.bucket, Key=uri.key)["Body"].read().decode("utf-8"))


@contextmanager
def if_match(s3: Any, uri: S3Uri, etag: str) -> Iterator[None]:
    """Every HeadObject and GetObject of `uri` through `s3` carries If-Match `etag` while this lasts: S3 answers 412
    PreconditionFailed once the object is no longer that version. boto3's transfer manager takes no IfMatch argument
    (s3transfer/constants.py ALLOWED_DOWNLOAD_ARGS) and pins only the ETag its own HeadObject finds, on ranged GETs
    alone; a handler of the client's parameter-build events sets the one recorded, on every request."""

    def pin(params: dict[str, Any], **_: Any) -> None:
        if params.get("Bucket") == uri.bucket and params.get("Key") == uri.key:
            params["IfMatch"] = etag

    events = [f"before-parameter-build.s3.{operation}" for operation in ("HeadObject", "GetObject")]
    for event in events:
        s3.meta.events.register(event, pin)
    try:
        yield
    finally:
        for event in events:
            s3.meta.events.unregister(event, pin)


def download(uri: S3Uri, path: Path, s3: Any = None, etag: str | None = None) -> None:
    """The object into `path`, whole or not at all (written beside it, then renamed into place). With `etag`, only
    that version of it: an S3Error with code PreconditionFailed (or 412) when the object has changed since."""
    s3 = s3 or client()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.part")
    pinned = if_match(s3, uri, etag) if etag is not None else nullcontext()
    try:
        with pinned:
            call(uri, lambda: s3.download_file(uri.bucket, uri.key, str(partial), Config=_transfer_config()))
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def upload_directory(directory: Path, uri: S3Uri, s3: Any = None) -> list[S3Uri]:
    """Every file under `directory` to the same relative key under `uri` (multipart and parallel for large files);
    the URIs written."""
    s3 = s3 or client()
    written = []
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        target = uri.join(path.relative_to(directory).as_posix())
        call(target, partial(s3.upload_file, str(path), target.bucket, target.key, Config=_transfer_config()))
        written.append(target)
    return written
