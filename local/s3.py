"""A throwaway S3 API on this machine, for the local run's artifacts and for tests: moto's server on a free port of
127.0.0.1. Its objects are in memory (PyPI `moto[server]`), and it dies with the process that started it.

    with LocalS3.start() as s3:
        s3.create_bucket("fsdp-eks-local")
        env = s3.client_environment()   # AWS_ENDPOINT_URL and throwaway keys, for boto3 and the S3 connector

The trainer reaches it through the same s3:// code paths as AWS: boto3 and the CRT client behind s3torchconnector
both read AWS_ENDPOINT_URL (trainer/base/s3/endpoint.py).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from local.etcd import LOOPBACK, free_port
from local.procs import die_with_parent
from stack.paths import PROJECT_ROOT
from trainer.base.s3.endpoint import DEFAULT_REGION, ENDPOINT_VARIABLE
from trainer.base.s3.uri import S3Uri

STARTUP_TIMEOUT_S = 30.0
SERVER_MODULE = "moto.server"
STOP_GRACE_S = 10.0
# moto accepts any key pair unless its IAM checks are on (INITIAL_NO_AUTH_ACTION_COUNT); these name no account.
ACCESS_KEY_ID = "local-access-key"
SECRET_ACCESS_KEY = "local-secret-key"  # a local stand-in that checks no key


class S3Error(RuntimeError):
    """The local S3 API could not be started; the message says why."""


@dataclass
class LocalS3:
    process: subprocess.Popen[bytes]
    port: int
    region: str = DEFAULT_REGION

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @classmethod
    def start(
        cls,
        region: str = DEFAULT_REGION,
        server_env: dict[str, str] | None = None,
        server_module: str = SERVER_MODULE,
        server_args: tuple[str, ...] = (),
    ) -> LocalS3:
        """Start moto's server and wait until it answers; `server_env` adds variables for the server (its IAM
        checks, say); `server_module` is another module serving moto's application on the same -H and -p options
        (the tests' one adds AWS's throttling, tests/harness/s3_server.py), with `server_args` after them."""
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", server_module, "-H", LOOPBACK, "-p", str(port), *server_args],
            cwd=PROJECT_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **(server_env or {})},
            preexec_fn=die_with_parent,  # the server must not outlive the run
        )
        server = cls(process, port, region)
        try:
            server._wait_until_serving()
        except BaseException:
            server.stop()
            raise
        return server

    def _wait_until_serving(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise S3Error(f"moto's S3 server exited {self.process.returncode} at start")
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1)
                return
            except OSError:
                time.sleep(0.2)
        raise S3Error(f"moto's S3 server did not answer on {self.endpoint} within {STARTUP_TIMEOUT_S:g} s")

    def client_environment(self) -> dict[str, str]:
        """What a process needs to reach this API as it would reach AWS: the endpoint, a region and keys."""
        return {
            ENDPOINT_VARIABLE: self.endpoint,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
        }

    def client(self) -> Any:
        """A boto3 S3 client of this API (for setting up buckets and objects, and for reading what a run wrote)."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=ACCESS_KEY_ID,
            aws_secret_access_key=SECRET_ACCESS_KEY,
        )

    def create_bucket(self, bucket: str) -> None:
        """Create `bucket`; one that exists already is left as it is."""
        client = self.client()
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
            client.create_bucket(Bucket=bucket)

    def upload(self, source: Path, target: S3Uri) -> list[S3Uri]:
        """Put the file `source` at `target`, or every file below the directory `source` under the prefix `target`
        (their paths relative to it), creating the bucket first; what was written."""
        self.create_bucket(target.bucket)
        files = sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() else [source]
        client = self.client()
        written = []
        for file in files:
            uri = target.join(file.relative_to(source).as_posix()) if source.is_dir() else target
            client.upload_file(str(file), uri.bucket, uri.key)
            written.append(uri)
        return written

    def keys(self, prefix: S3Uri) -> list[str]:
        """Every key under `prefix` (a prefix, whether or not it ends with "/"), in S3's order."""
        paginator = self.client().get_paginator("list_objects_v2")
        return [
            item["Key"]
            for page in paginator.paginate(Bucket=prefix.bucket, Prefix=prefix.prefix)
            for item in page.get("Contents", [])
        ]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> LocalS3:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()
