"""The final model into S3: the run's Hugging Face export (config.json, *.safetensors and their index, the
tokenizer's files), every file, under `<--artifacts-uri>/model/`, and last a manifest that says it is complete.

    model/config.json, model/model-00001-of-00003.safetensors, ...      the export's files
    model/export-manifest.json                                           {"files": [{"name", "size", "etag"}, ...]}

S3 has no rename, so a reader cannot tell a half-written or mixed model from a whole one by its files. The manifest
is that signal: rank 0 (trainer/train.py) deletes it first, uploads every file with boto3's transfer manager
(multipart and parallel for the large weight files, trainer/base/s3/transfer.py upload_directory), deletes what an
earlier export left there, and writes the manifest last, naming each file's size and ETag as S3 lists them. The model is
complete exactly while the manifest exists; a re-export removes it before it writes anything. download_command is
the download the stack's output (nextCommands.downloadModel) and docs/job.md give: it waits for the manifest, copies
the prefix, and then checks that the manifest is still the same version (If-Match its ETag), so a copy that a
re-export overlapped fails instead of passing as whole.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trainer.base.s3.run_layout import MODEL_DIRECTORY
from trainer.base.s3.transfer import S3Object, call, client, list_objects, upload_directory
from trainer.base.s3.uri import S3Uri

MANIFEST = "export-manifest.json"
DOWNLOAD_DIRECTORY = "./model"

log = logging.getLogger(__name__)


def model_uri(artifacts_uri: str) -> S3Uri:
    """Where the run's final model lands: `<artifacts-uri>/model/` (a prefix)."""
    model = S3Uri.parse(artifacts_uri, "--artifacts-uri").join(MODEL_DIRECTORY)
    return S3Uri(model.bucket, model.prefix)


def manifest_uri(model: S3Uri) -> S3Uri:
    return model.join(MANIFEST)


@dataclass(frozen=True)
class ExportedFile:
    name: str
    """Relative to the model's prefix."""
    size: int
    etag: str


@dataclass(frozen=True)
class ModelManifest:
    files: tuple[ExportedFile, ...]

    def to_json(self) -> str:
        return json.dumps({"files": [asdict(f) for f in self.files]}, indent=2)

    @classmethod
    def from_json(cls, text: str) -> ModelManifest:
        entries: list[dict[str, Any]] = json.loads(text)["files"]
        return cls(tuple(ExportedFile(str(e["name"]), int(e["size"]), str(e["etag"])) for e in entries))

    @classmethod
    def of(cls, model: S3Uri, objects: list[S3Object]) -> ModelManifest:
        return cls(tuple(ExportedFile(o.key[len(model.prefix) :], o.size, o.etag) for o in objects))

    def matches(self, model: S3Uri, objects: list[S3Object]) -> bool:
        """Whether the listed objects (the manifest itself left out) are exactly these files, each in this version."""
        return ModelManifest.of(model, [o for o in objects if o.key != manifest_uri(model).key]) == self


def read_manifest(model: S3Uri, s3: Any = None) -> ModelManifest | None:
    """The model's manifest when the export is complete; None while there is none."""
    s3 = s3 or client()
    marker = manifest_uri(model)
    if not any(o.key == marker.key for o in list_objects(marker, s3)):
        return None
    body = call(marker, lambda: s3.get_object(Bucket=marker.bucket, Key=marker.key)["Body"].read())
    return ModelManifest.from_json(body.decode("utf-8"))


def upload_model(directory: Path, artifacts_uri: str) -> S3Uri:
    """The manifest deleted (from here on the model is incomplete), every file of the export uploaded to model_uri,
    the keys there that this export did not write deleted (another shard count's, LoRA's adapter of an earlier run),
    and the manifest written last; an S3Error (naming the URI and AWS's error) if any call fails."""
    target, s3 = model_uri(artifacts_uri), client()
    marker = manifest_uri(target)
    listed = list_objects(target, s3)
    if any(o.key == marker.key for o in listed):  # only then: in a versioned bucket every DELETE adds a delete marker
        call(marker, lambda: s3.delete_object(Bucket=marker.bucket, Key=marker.key))
    written = {uri.key for uri in upload_directory(directory, target, s3)}
    stale = [S3Uri(target.bucket, o.key) for o in list_objects(target, s3) if o.key not in written]
    for uri in stale:
        call(uri, lambda uri=uri: s3.delete_object(Bucket=uri.bucket, Key=uri.key))
    if stale:
        log.info("deleted %d files of an earlier export under %s", len(stale), target)
    manifest = ModelManifest.of(target, [o for o in list_objects(target, s3) if o.key in written])
    body = manifest.to_json().encode()
    call(marker, lambda: s3.put_object(Bucket=marker.bucket, Key=marker.key, Body=body))
    log.info("model in %s (%d files, complete: %s)", target, len(manifest.files), marker)
    return target


def download_command(model: S3Uri, directory: str = DOWNLOAD_DIRECTORY) -> str:
    """The AWS CLI commands that download a complete model: wait for the manifest (HeadObject every 5 s, up to 20
    times: AWS CLI `s3api wait object-exists`), note its ETag, copy the prefix, and HEAD the manifest again If-Match
    that ETag: 412 Precondition Failed (or 404) when a re-export began meanwhile, and the copy is not to be used."""
    marker = manifest_uri(model)
    where = f"--bucket {marker.bucket} --key {marker.key}"
    return (
        f"aws s3api wait object-exists {where}"
        f' && etag="$(aws s3api head-object {where} --query ETag --output text)"'
        f" && aws s3 cp --recursive {model} {directory}"
        f' && aws s3api head-object {where} --if-match "$etag" --query ETag --output text'
    )
