"""The local run's S3: the artifacts bucket on moto's server (local/s3.py), local files put there as a stack's s3://
inputs, and what the run left in it.

On the cluster the job's pods write under `s3://<artifacts bucket>/<prefix>/<stack>/run-<n>/`: the pod's
`--artifacts-uri s3://$(FSDP_EKS_ARTIFACTS_BUCKET)/...` names the bucket through the container's variable, which the
kubelet expands. Here the same variable names a bucket in the local S3 API (the stack's artifacts.bucket when it
names one, the same name in the local server; else the stack's own bucket's prefix with "local" for its unique
suffix: fsdp-eks-<stack>-artifacts-local), local/launch.py expands the reference the same way, and the trainer
reaches it through the same s3:// code paths as on AWS, with the endpoint in AWS_ENDPOINT_URL
(trainer/base/s3/endpoint.py). The summary lists what is there: nothing in it is formatted from the flag alone.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local.s3 import LocalS3
from stack.names import ARTIFACTS_BUCKET_VARIABLE, artifacts_bucket_prefix
from trainer.base.errors import InputError
from trainer.base.s3.model_upload import model_uri, read_manifest
from trainer.base.s3.transfer import list_objects
from trainer.base.s3.uri import S3Uri, bucket_name_problem
from trainer.checkpoint.s3_store import S3Checkpoint, S3Checkpoints, checkpoints_root
from trainer.record.archive import SUMMARY_FILE, record_uri

LOCAL_BUCKET_SUFFIX = "local"  # in place of the unique suffix the provider adds to the stack's own bucket's prefix


def local_bucket(stack: str, configured: str | None) -> str:
    """The artifacts bucket in the local S3 API: the stack's artifacts.bucket, else the name of the bucket the stack
    would create (stack/names.py artifacts_bucket_prefix) with "local" for its unique suffix."""
    return configured or artifacts_bucket_prefix(stack) + LOCAL_BUCKET_SUFFIX


@dataclass(frozen=True)
class S3Upload:
    """`--s3-upload PATH=s3://bucket/key`: a local file (or a directory, recursively) put into the local S3 API before
    the run, so that a stack's s3:// inputs exist there."""

    source: Path
    target: S3Uri

    @classmethod
    def parse(cls, value: str) -> S3Upload:
        """PATH=s3://bucket/key; argparse's error (ArgumentTypeError) for anything else or a PATH that is not there."""
        path, separator, uri = value.rpartition("=s3://")
        if not separator or not path:
            raise argparse.ArgumentTypeError(f"{value!r}: expected PATH=s3://bucket/key")
        try:
            target = S3Uri.parse(f"s3://{uri}", "--s3-upload")
        except InputError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        source = Path(path).expanduser()
        if not source.exists():
            raise argparse.ArgumentTypeError(f"{value!r}: {path}: no such file or directory")
        return cls(source, target)


@dataclass(frozen=True)
class RunArtifacts:
    """What a run left under its --artifacts-uri, as listed in the local S3 API."""

    uri: S3Uri
    model: S3Uri | None  # <uri>/model/ when its export is complete: its manifest there, naming what is there
    model_files: tuple[str, ...]  # the manifest's files, relative to it
    checkpoints: tuple[S3Checkpoint, ...]  # complete ones (meta.json written), oldest first
    record: S3Uri | None = None  # <uri>/record/ when it holds objects
    record_files: tuple[str, ...] = ()  # their names relative to it
    record_summary: dict[str, Any] | None = None  # its summary.json

    @property
    def newest_checkpoint(self) -> S3Checkpoint | None:
        return self.checkpoints[-1] if self.checkpoints else None

    def lines(self) -> list[str]:
        model = f"{self.model} ({len(self.model_files)} files)" if self.model else f"none complete under {self.uri}"
        newest = self.newest_checkpoint
        checkpoint = f"{newest.uri} (step {newest.step})" if newest else f"none under {self.uri}"
        record = f"{self.record} ({', '.join(self.record_files)})" if self.record else f"none under {self.uri}"
        return [f"model in S3:    {model}", f"S3 checkpoint:  {checkpoint}", f"record in S3:   {record}"]


class LocalStorage:
    """The run's S3 API and its artifacts bucket: started before the pods, stopped with the run."""

    def __init__(self, s3: LocalS3, bucket: str) -> None:
        self.s3, self.bucket = s3, bucket

    @classmethod
    def start(cls, bucket: str, uploads: tuple[S3Upload, ...] = ()) -> tuple[LocalStorage, list[str]]:
        """Start the S3 API, create the bucket and put the uploads in; a line for the run's header per step. The
        server is stopped again if any of it fails."""
        problem = bucket_name_problem(bucket)
        if problem:
            raise InputError(f"the artifacts bucket: {problem}")
        s3 = LocalS3.start()
        try:
            s3.create_bucket(bucket)
            lines = [f"S3: moto's S3 API at {s3.endpoint}, artifacts bucket {bucket}"]
            for upload in uploads:
                written = s3.upload(upload.source, upload.target)
                lines.append(f"  uploaded {upload.source} -> {upload.target} (objects: {len(written)})")
        except BaseException:
            s3.stop()
            raise
        return cls(s3, bucket), lines

    def container_environment(self) -> dict[str, str]:
        """What every container gets in place of the pod's: the S3 client's variables and the bucket's name."""
        return {**self.s3.client_environment(), ARTIFACTS_BUCKET_VARIABLE: self.bucket}

    def checkpoints(self, artifacts_uri: str) -> S3Checkpoints:
        return S3Checkpoints(checkpoints_root(artifacts_uri), self.s3.client())

    def newest_checkpoint_step(self, artifacts_uri: str) -> int | None:
        """The step of the newest complete checkpoint under the run's artifacts, None when there is none yet."""
        complete = self.checkpoints(artifacts_uri).complete()
        return complete[-1].step if complete else None

    def artifacts(self, artifacts_uri: str) -> RunArtifacts:
        """What the run left, read as any reader would: the model only if its manifest names exactly what is there."""
        model, client = model_uri(artifacts_uri), self.s3.client()
        manifest = read_manifest(model, client)
        complete = manifest is not None and manifest.matches(model, list_objects(model, client))
        files = tuple(f.name for f in manifest.files) if manifest is not None and complete else ()
        checkpoints = tuple(self.checkpoints(artifacts_uri).complete())
        uri = S3Uri.parse(artifacts_uri, "--artifacts-uri")
        record = record_uri(artifacts_uri)
        kept = tuple(key[len(record.prefix) :] for key in self.s3.keys(record))
        summary = None
        if SUMMARY_FILE in kept:
            summary = json.loads(
                client.get_object(Bucket=record.bucket, Key=record.join(SUMMARY_FILE).key)["Body"].read()
            )
        model_kept = model if complete else None
        return RunArtifacts(uri, model_kept, files, checkpoints, record if kept else None, kept, summary)

    def stop(self) -> None:
        self.s3.stop()
