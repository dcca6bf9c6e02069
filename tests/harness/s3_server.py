"""moto's S3 API with what a test needs of AWS's answers that moto leaves out: 503 SlowDown on a share of the writes,
also in bursts, and, with IAM checks on, the two rules of S3's authorisation that hang on s3:ListBucket.

    python -m tests.harness.s3_server -H 127.0.0.1 -p PORT [--iam-rules]     (local/s3.py LocalS3.start runs it)
    PUT /_throttle {"every": 3, "burst_every": 40, "burst_length": 4}         the plan, from now on (counts reset)
    GET /_throttle                                                            {"writes", "throttled", "longest_run"}

Throttling: S3 answers a request beyond a prefix's rate with HTTP 503, error code SlowDown, "Please reduce your
request rate." (Amazon S3 API reference, "Error responses", List of error codes). The writes are the requests S3's
3,500-per-second limit counts (PUT, COPY, POST, DELETE of objects; trainer/base/s3/limits.py): each is numbered as it
arrives, and ThrottlePlan decides from the number alone, so a test's run is throttled the same way each time.

IAM (--iam-rules; moto's own checks, INITIAL_NO_AUTH_ACTION_COUNT, evaluate Action and Resource and skip the
conditions they do not know, StringLike among them: moto/iam/access_control.py, policy_conditions.py):
- a listing (ListObjects, ListObjectsV2) is allowed only if the caller's policies allow s3:ListBucket on the bucket
  with s3:prefix the listing's prefix (the service authorization reference's condition key for ListBucket);
- a GET or HEAD of a key that does not exist answers 404 only to a caller allowed s3:ListBucket with s3:prefix that
  key, 403 AccessDenied to any other (Amazon S3 API reference, HeadObject and GetObject, "Permissions"; S3 reads
  the requested key as s3:prefix there, the behaviour Ceph's RGW matched in ceph/ceph#68577);
- DeleteObjects needs s3:DeleteObject on each key, not on the bucket, which is where moto asks (S3Rules._delete_keys).
The caller's policies are the ones moto holds for the request's access key (a user's, or an assumed role's), judged
by tests/ci/iam_eval.py.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import threading
import urllib.request
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import parse_qs
from xml.etree import ElementTree

from local.s3 import LocalS3
from tests.ci.iam_eval import allowed

CONTROL_PATH = "/_throttle"
WRITE_METHODS = frozenset({"PUT", "POST", "DELETE"})
# The query parameters of ListObjects and ListObjectsV2 (Amazon S3 API reference); a bucket GET with any other
# (?location, ?versioning, ?uploads, ...) is another operation.
LISTING_PARAMETERS = frozenset(
    {"list-type", "prefix", "delimiter", "max-keys", "continuation-token", "start-after", "encoding-type",
     "fetch-owner", "marker"}
)  # fmt: skip
SLOW_DOWN = ("503 Slow Down", "SlowDown", "Please reduce your request rate.")
ACCESS_DENIED = ("403 Forbidden", "AccessDenied", "Access Denied")

StartResponse = Callable[..., Any]


@dataclass(frozen=True)
class ThrottlePlan:
    """Which writes S3 throttles, by their number n (from 1): the first `burst_length` of every `burst_every` writes
    (a burst), and besides every `every`-th write (a share). 0 turns either off."""

    every: int = 0
    burst_every: int = 0
    burst_length: int = 0

    def throttles(self, n: int) -> bool:
        in_burst = self.burst_every > 0 and (n - 1) % self.burst_every < self.burst_length
        return in_burst or (self.every > 0 and n % self.every == 0)


@dataclass
class ThrottleCount:
    writes: int = 0
    throttled: int = 0
    longest_run: int = 0
    """The most writes throttled one after another."""
    run: int = field(default=0, repr=False)

    def record(self, throttled: bool) -> None:
        self.writes += 1
        self.throttled += throttled
        self.run = self.run + 1 if throttled else 0
        self.longest_run = max(self.longest_run, self.run)


def error_document(code: str, message: str) -> bytes:
    """S3's error document (Amazon S3 API reference, "Error responses")."""
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
        f"<RequestId>{uuid.uuid4().hex[:16].upper()}</RequestId></Error>"
    ).encode()


def credential(environ: dict[str, Any]) -> tuple[str, str] | None:
    """The access key id and the service of a SigV4-signed request ("Credential=AKID/date/region/service/...")."""
    authorization = str(environ.get("HTTP_AUTHORIZATION", ""))
    scope = authorization.partition("Credential=")[2].partition(",")[0].split("/")
    return (scope[0], scope[3]) if len(scope) >= 4 else None


def bucket_and_key(environ: dict[str, Any]) -> tuple[str, str]:
    """Path-style addressing (/bucket/key), as every client here uses (trainer/base/s3/endpoint.py)."""
    bucket, _, key = str(environ.get("PATH_INFO", "")).lstrip("/").partition("/")
    return bucket, key


def caller_policy(environ: dict[str, Any], access_key_id: str) -> dict[str, Any] | None:
    """Every statement of the caller's identity policies, as moto holds them; None for a key moto does not know."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.iam.access_control import CreateAccessKeyFailure, IAMPolicy, create_access_key

    token = environ.get("HTTP_X_AMZ_SECURITY_TOKEN")
    headers = {"X-Amz-Security-Token": str(token)} if token is not None else {}
    try:
        key = create_access_key(DEFAULT_ACCOUNT_ID, "aws", access_key_id, headers)
    except CreateAccessKeyFailure:
        return None
    statements: list[dict[str, Any]] = []
    for policy in key.collect_policies():
        found = IAMPolicy(policy)._policy_json["Statement"]  # moto parses every form of document it stores
        statements += found if isinstance(found, list) else [found]
    return {"Statement": statements}


class S3Rules:
    """The WSGI middleware around moto's application."""

    def __init__(self, app: Callable[[dict[str, Any], StartResponse], Iterable[bytes]], iam_rules: bool) -> None:
        self.app, self.iam_rules = app, iam_rules
        self.plan, self.count = ThrottlePlan(), ThrottleCount()
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == CONTROL_PATH:
            return self._control(environ, start_response)
        signed = credential(environ)
        if signed is None or signed[1] != "s3":
            return self.app(environ, start_response)
        method, (bucket, key) = str(environ["REQUEST_METHOD"]), bucket_and_key(environ)
        query = parse_qs(str(environ.get("QUERY_STRING", "")), keep_blank_values=True)
        deletes_keys = method == "POST" and not key and "delete" in query
        if method in WRITE_METHODS and (key or deletes_keys):
            with self.lock:
                throttled = self.plan.throttles(self.count.writes + 1)
                self.count.record(throttled)
            if throttled:
                _drain(environ)
                return _error(environ, start_response, SLOW_DOWN)
        if not self.iam_rules or not (method in ("GET", "HEAD") or deletes_keys):
            return self.app(environ, start_response)
        policy = caller_policy(environ, signed[0])
        if policy is None:
            return self.app(environ, start_response)
        arn = f"arn:aws:s3:::{bucket}"
        if deletes_keys:
            return self._delete_keys(environ, start_response, policy, arn)
        if not key:
            listing = method == "GET" and set(query) <= LISTING_PARAMETERS
            prefix = query.get("prefix", [""])[0]
            if listing and not allowed(policy, "s3:ListBucket", arn, {"s3:prefix": prefix}):
                return _error(environ, start_response, ACCESS_DENIED)
            return self.app(environ, start_response)
        answered: list[Any] = []
        body = self.app(environ, lambda status, headers, *rest: answered.append((status, headers, rest)))
        status, headers, rest = answered[0] if answered else ("500 Internal Server Error", [], ())
        if str(status).startswith("404") and not allowed(policy, "s3:ListBucket", arn, {"s3:prefix": key}):
            close = getattr(body, "close", None)  # a WSGI iterable may hold resources until closed (PEP 3333)
            if callable(close):
                close()
            return _error(environ, start_response, ACCESS_DENIED)
        start_response(status, headers, *rest)
        return body

    def _delete_keys(
        self, environ: dict[str, Any], start_response: StartResponse, policy: dict[str, Any], arn: str
    ) -> Iterable[bytes]:
        """DeleteObjects, authorised as S3 does: s3:DeleteObject on each key (Amazon S3 API reference,
        DeleteObjects). moto authorises it once, for the bucket's ARN (moto/s3/responses.py _bucket_response_post),
        which a policy scoped to keys never allows; when every key is allowed here, moto's check of the bucket is
        skipped for this request (a request with a key refused is left to moto, which refuses every key)."""
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        environ["wsgi.input"] = io.BytesIO(body)
        keys = [element.text or "" for element in ElementTree.fromstring(body).iter() if element.tag.endswith("Key")]
        if all(allowed(policy, "s3:DeleteObject", f"{arn}/{key}") for key in keys):
            _per_key.authorised = True
        try:
            return self.app(environ, start_response)
        finally:
            _per_key.authorised = False

    def _control(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        if environ["REQUEST_METHOD"] == "PUT":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            plan = ThrottlePlan(**json.loads(environ["wsgi.input"].read(length) or b"{}"))
            with self.lock:
                self.plan, self.count = plan, ThrottleCount()
        with self.lock:
            answer = json.dumps({k: v for k, v in asdict(self.count).items() if k != "run"}).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(answer)))])
        return [answer]


def _drain(environ: dict[str, Any]) -> None:
    """Read the refused request's body, so that the connection stays usable for the client's retry."""
    stream, length = environ["wsgi.input"], environ.get("CONTENT_LENGTH")
    if length:
        remaining = int(length)
        while remaining > 0:
            chunk = stream.read(min(remaining, 1 << 20))
            if not chunk:
                break
            remaining -= len(chunk)
    elif environ.get("wsgi.input_terminated"):
        while stream.read(1 << 20):
            pass


def _error(environ: dict[str, Any], start_response: StartResponse, error: tuple[str, str, str]) -> list[bytes]:
    status, code, message = error
    body = b"" if environ["REQUEST_METHOD"] == "HEAD" else error_document(code, message)
    start_response(status, [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
    return [body]


_per_key = threading.local()  # werkzeug serves each request in one thread, middleware and moto alike


def _skip_bucket_check_of_authorised_deletes() -> None:
    from moto.s3.responses import S3Response

    bucket_check = S3Response._authenticate_and_authorize_s3_action

    def authorise(self: Any, bucket_name: str | None = None, key_name: str | None = None) -> None:
        if key_name is None and self.data.get("Action") == "DeleteObject" and getattr(_per_key, "authorised", False):
            return
        bucket_check(self, bucket_name=bucket_name, key_name=key_name)

    S3Response._authenticate_and_authorize_s3_action = authorise  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> None:
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import run_simple

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    parser.add_argument("--iam-rules", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("MOTO_PORT", str(args.port))  # as moto.server's main: moto names its own URLs with it
    if args.iam_rules:
        _skip_bucket_check_of_authorised_deletes()
    app = S3Rules(DomainDispatcherApplication(create_backend_app), args.iam_rules)
    run_simple(args.host, args.port, app, threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()


def start_s3(iam_rules: bool = False, server_env: dict[str, str] | None = None) -> LocalS3:
    """This server, as local/s3.py starts moto's: on 127.0.0.1, a free port, dying with this process."""
    args = ("--iam-rules",) if iam_rules else ()
    return LocalS3.start(server_env=server_env, server_module=__name__, server_args=args)


def throttle(server: LocalS3, plan: ThrottlePlan) -> None:
    """Throttle the server's writes by `plan` from now on, its counts started afresh."""
    body = json.dumps(asdict(plan)).encode()
    request = urllib.request.Request(f"{server.endpoint}{CONTROL_PATH}", body, method="PUT")
    with urllib.request.urlopen(request, timeout=10):
        pass


def throttle_count(server: LocalS3) -> ThrottleCount:
    with urllib.request.urlopen(f"{server.endpoint}{CONTROL_PATH}", timeout=10) as answer:
        return ThrottleCount(**json.loads(answer.read()))
