"""Inputs from S3, staged once onto the run's shared storage: the data set's objects and the model's directory.

    --dataset s3://data/dialogues.jsonl     one .jsonl, .json or .txt object
    --dataset s3://data/dialogues/          every such object under the prefix, in key order, read as one data set
    --model s3://models/llama-3-8b/         a model directory in Hugging Face format: config.json, *.safetensors
                                            (and their index), the tokenizer's files

A key that ends in .jsonl, .json or .txt names an object; any other key names a prefix. `python -m trainer.stage`
(run by the launcher before torchrun) downloads what the flag names into --data-cache-dir:

    <data-cache-dir>/s3/<digest of the URI>/files/<key below the prefix>     the objects, as named in S3
    <data-cache-dir>/s3/<digest of the URI>/manifest.json                   each object's key, ETag and size

The manifest is written last: its presence means the files are complete. Each object is downloaded If-Match the ETag
its listing found, so the files are the versions the manifest names. Staging again lists the objects and
downloads only those whose ETag or size changed, so an unchanged object is never downloaded twice. The workers never
call S3 for these: they read the manifest (the data set's identity in trainer/data/cache.py includes every ETag, so a
changed object is tokenised again) and the files. Without --data-cache-dir an s3:// data set or model is refused:
the workers would each have to download it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from trainer.base.errors import InputError
from trainer.base.s3.transfer import S3Error, S3Object, client, describe, download, list_objects
from trainer.base.s3.uri import S3Uri

DATA_SUFFIXES = (".jsonl", ".json", ".txt")
# What the trainer reads of a model directory, as from the hub (trainer/stage.py WEIGHT_FILES, TOKENIZER_FILES):
# config and index .json files, weights, tokenizer.model (sentencepiece), vocabulary .txt files, the chat template
# (chat_template.jinja: transformers' CHAT_TEMPLATE_FILE, tokenization_utils_base.py). Subdirectories (the original/
# consolidated checkpoint of Meta's repositories) are left out.
MODEL_SUFFIXES = (".json", ".safetensors", ".model", ".txt", ".jinja")
STAGED = "s3"
MANIFEST = "manifest.json"
FILES = "files"
# S3's answer to a GET whose If-Match names another ETag (Amazon S3 API reference, GetObject; a HEAD answers 412
# without a body, so without the code).
PRECONDITION_FAILED = "PreconditionFailed"


@dataclass(frozen=True)
class StagedObjects:
    """What one s3:// URI staged: its objects, each with the local name below FILES."""

    uri: str
    objects: tuple[S3Object, ...]
    names: tuple[str, ...]

    def identity(self) -> dict[str, object]:
        """What names the content: the URI and every object's key, ETag and size."""
        return {"s3": self.uri, "objects": [[o.key, o.etag, o.size] for o in self.objects]}

    def to_json(self) -> str:
        entries = [asdict(o) | {"name": name} for o, name in zip(self.objects, self.names, strict=True)]
        return json.dumps({"uri": self.uri, "objects": entries}, indent=2)

    @classmethod
    def from_json(cls, text: str) -> StagedObjects:
        loaded: dict[str, Any] = json.loads(text)
        entries = loaded["objects"]
        objects = tuple(S3Object(e["key"], int(e["size"]), str(e["etag"])) for e in entries)
        return cls(str(loaded["uri"]), objects, tuple(str(e["name"]) for e in entries))


def staged_directory(cache_dir: str | Path, uri: S3Uri) -> Path:
    """Where `uri` is staged: deterministic, so the workers find what staging wrote from the same flag value."""
    return Path(cache_dir).expanduser() / STAGED / hashlib.sha256(str(uri).encode()).hexdigest()[:16]


def local_name(uri: S3Uri, key: str, flag: str) -> str:
    """An object's path below FILES: its key below the prefix (an object URI: its last segment). A key that would
    leave the directory ('..') is refused."""
    relative = PurePosixPath(uri.name if key == uri.key else key[len(uri.prefix) :])
    if not relative.parts or any(part in ("", ".", "..") for part in relative.parts):
        raise InputError(f"{flag} {uri}: the object key {key!r} cannot be a file name")
    return relative.as_posix()


def read_manifest(cache_dir: str | Path, uri: S3Uri) -> StagedObjects | None:
    manifest = staged_directory(cache_dir, uri) / MANIFEST
    return StagedObjects.from_json(manifest.read_text()) if manifest.is_file() else None


def stage_objects(uri: S3Uri, objects: list[S3Object], cache_dir: str | Path, flag: str, s3: Any) -> StagedObjects:
    """Download what changed since the last staging of `uri` (by ETag and size), drop what S3 no longer has, and
    write the manifest last. When nothing changed, nothing is touched: another pod's workers may be reading it."""
    root = staged_directory(cache_dir, uri)
    previous = read_manifest(cache_dir, uri)
    wanted = StagedObjects(str(uri), tuple(objects), tuple(local_name(uri, o.key, flag) for o in objects))
    kept = dict(zip(previous.names, previous.objects, strict=True)) if previous else {}
    changed = [
        (item, name)
        for item, name in zip(wanted.objects, wanted.names, strict=True)
        if kept.get(name) != item or not (root / FILES / name).is_file()
    ]
    if previous == wanted and not changed:
        return wanted
    (root / MANIFEST).unlink(missing_ok=True)  # from here until the new manifest, the directory is incomplete
    for item, name in changed:
        download_listed(uri, item, root / FILES / name, flag, s3)
    for name in set(kept) - set(wanted.names):
        (root / FILES / name).unlink(missing_ok=True)
    root.mkdir(parents=True, exist_ok=True)
    partial = root / f".{MANIFEST}.part"
    partial.write_text(wanted.to_json())
    partial.replace(root / MANIFEST)
    return wanted


def download_listed(uri: S3Uri, item: S3Object, path: Path, flag: str, s3: Any) -> None:
    """The very version of `item` that the listing found (If-Match its ETag): the manifest records that ETag, and the
    workers' data cache is keyed by it. An object written again since fails staging, naming it."""
    try:
        download(S3Uri(uri.bucket, item.key), path, s3, etag=item.etag)
    except S3Error as error:
        if error.code != PRECONDITION_FAILED and error.status != 412:
            raise
        raise InputError(
            f"{flag} {uri}: s3://{uri.bucket}/{item.key} changed while it was being staged (its ETag is no longer "
            f"{item.etag}); stage again once nothing writes to it"
        ) from None


def dataset_objects(uri: S3Uri, s3: Any) -> list[S3Object]:
    """The data set's objects: the one object the URI names, or every data object under its prefix."""
    if uri.key.endswith(DATA_SUFFIXES):
        return [describe(uri, s3)]
    found = [o for o in list_objects(S3Uri(uri.bucket, uri.prefix), s3) if o.key.endswith(DATA_SUFFIXES)]
    if not found:
        raise InputError(f"--dataset {uri}: no {', '.join(DATA_SUFFIXES)} object under this prefix")
    return found


def model_objects(uri: S3Uri, s3: Any) -> list[S3Object]:
    """The model directory's files: those directly under the prefix with a suffix the trainer reads."""
    prefix = S3Uri(uri.bucket, uri.prefix)
    found = [
        o for o in list_objects(prefix, s3) if "/" not in o.key[len(prefix.key) :] and o.key.endswith(MODEL_SUFFIXES)
    ]
    if not any(o.key == prefix.key + "config.json" for o in found):
        raise InputError(f"--model {uri}: no config.json under this prefix (expected a model in Hugging Face format)")
    return found


def stage_dataset(dataset: str, cache_dir: str | Path) -> StagedObjects:
    s3 = client()
    uri = S3Uri.parse(dataset, "--dataset")
    return stage_objects(uri, dataset_objects(uri, s3), cache_dir, "--dataset", s3)


def stage_model(model: str, cache_dir: str | Path) -> Path:
    """The model's files in a local directory (config.json, weights, tokenizer) that the workers load offline."""
    s3 = client()
    uri = S3Uri.parse(model, "--model")
    stage_objects(uri, model_objects(uri, s3), cache_dir, "--model", s3)
    return staged_directory(cache_dir, uri) / FILES


def staged(value: str, flag: str, cache_dir: str | None) -> tuple[StagedObjects, Path]:
    """What staging wrote for `flag value` and the directory of its files; an InputError naming the flag when it has
    not been staged (the workers' side)."""
    if not cache_dir:
        raise InputError(f"{flag} {value}: needs --data-cache-dir, the shared directory it is staged into once")
    uri = S3Uri.parse(value, flag)
    found = read_manifest(cache_dir, uri)
    if found is None:
        raise InputError(
            f"{flag} {value}: not staged in --data-cache-dir {cache_dir} (python -m trainer.stage, which the launcher "
            "runs before the workers with --stage-inputs, downloads it there)"
        )
    return found, staged_directory(cache_dir, uri) / FILES


def staged_dataset_files(dataset: str, cache_dir: str | None) -> list[Path]:
    """The staged data set's files, in key order."""
    found, files = staged(dataset, "--dataset", cache_dir)
    return [files / name for name in found.names]
