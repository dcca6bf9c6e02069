"""The checkpoints' S3 tier as objects: which are complete, their meta.json, pruning. Through boto3, without torch.

    <artifacts-uri>/checkpoints/
        step_00000040/   complete: DCP's objects (__<rank>_<n>.distcp, .metadata) and meta.json
        step_00000050/   no meta.json: a save still being written, or one that failed; never read, deleted by a prune

S3 has no rename, so the commit is an object written last: rank 0 writes meta.json only after DCP's save returned on
it, and DCP's coordinator returns (having written .metadata) only after gathering every rank's successful write
(torch/distributed/checkpoint/state_dict_saver.py, the "write" all_reduce before `finish`; trainer/checkpoint/commit.py
has the detail). A checkpoint on S3 is complete exactly when its meta.json exists. A save of a step whose prefix holds
objects already (an older run's checkpoint of the same step, or a failed attempt) deletes them first, meta.json
before the rest, so that no crash leaves a meta.json beside a mixture of two saves.

The artifacts bucket is versioned (infra/), so what a prune deletes stays recoverable as noncurrent versions until
the bucket's lifecycle rule expires them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from trainer.base.s3.run_layout import CHECKPOINT_DIRECTORY
from trainer.base.s3.transfer import S3Error, call, list_objects
from trainer.base.s3.transfer import client as s3_client
from trainer.base.s3.uri import S3Uri
from trainer.checkpoint.layout import META_FILE, checkpoint_name, checkpoint_step

# DeleteObjects takes at most 1,000 keys per request (Amazon S3 API reference, DeleteObjects).
DELETE_BATCH = 1000


def checkpoints_root(artifacts_uri: str) -> S3Uri:
    """Where a run with --artifacts-uri keeps its durable checkpoints."""
    return S3Uri.parse(artifacts_uri, "--artifacts-uri").join(CHECKPOINT_DIRECTORY)


def checkpoint_uri(root: S3Uri, step: int) -> S3Uri:
    return root.join(checkpoint_name(step))


@dataclass(frozen=True)
class S3Checkpoint:
    step: int
    uri: S3Uri
    complete: bool
    """Its meta.json exists."""


class S3Checkpoints:
    """The step_<N> checkpoints directly under one prefix, through the run's boto3 client
    (trainer/base/s3/transfer.py)."""

    def __init__(self, root: S3Uri, client: Any = None) -> None:
        self.root = root
        self.client = client if client is not None else s3_client()

    def _keys(self, prefix: S3Uri) -> list[str]:
        return [item.key for item in list_objects(S3Uri(prefix.bucket, prefix.prefix), self.client)]

    def all(self) -> list[S3Checkpoint]:
        """Every step_<N> under the root, complete or not, oldest first (one listing)."""
        steps: dict[int, bool] = {}
        for key in self._keys(self.root):
            name, _, rest = key[len(self.root.prefix) :].partition("/")
            step = checkpoint_step(name)
            if step is not None and rest:
                steps[step] = steps.get(step, False) or rest == META_FILE
        return [S3Checkpoint(step, checkpoint_uri(self.root, step), done) for step, done in sorted(steps.items())]

    def complete(self) -> list[S3Checkpoint]:
        return [checkpoint for checkpoint in self.all() if checkpoint.complete]

    def is_complete(self, checkpoint: S3Uri) -> bool:
        meta = checkpoint.join(META_FILE)
        return any(item.key == meta.key for item in list_objects(meta, self.client))

    def read_meta(self, checkpoint: S3Uri) -> dict[str, Any]:
        meta = checkpoint.join(META_FILE)
        return json.loads(call(meta, lambda: self.client.get_object(Bucket=meta.bucket, Key=meta.key)["Body"].read()))

    def write_meta(self, checkpoint: S3Uri, meta: dict[str, Any]) -> None:
        """The commit: one PUT, after every other object of the checkpoint is written."""
        body, target = json.dumps(meta, indent=2, sort_keys=True).encode(), checkpoint.join(META_FILE)
        call(target, lambda: self.client.put_object(Bucket=target.bucket, Key=target.key, Body=body))

    def delete(self, checkpoint: S3Uri) -> None:
        """meta.json first (from then on the checkpoint is incomplete, never read), then everything else. Only keys
        that exist: in a versioned bucket, deleting a missing key still adds a delete marker (Amazon S3 user guide,
        "Deleting object versions from a versioning-enabled bucket")."""
        keys = self._keys(checkpoint)
        meta = checkpoint.join(META_FILE)
        if meta.key in keys:
            call(meta, lambda: self.client.delete_object(Bucket=meta.bucket, Key=meta.key))
        rest = [key for key in keys if key != meta.key]
        for start in range(0, len(rest), DELETE_BATCH):
            batch = {"Objects": [{"Key": key} for key in rest[start : start + DELETE_BATCH]], "Quiet": True}
            answer = call(
                checkpoint, lambda batch=batch: self.client.delete_objects(Bucket=checkpoint.bucket, Delete=batch)
            )
            refused = answer.get("Errors") or []
            if refused:
                # DeleteObjects answers 200 and lists each key it did not delete (Amazon S3 API reference,
                # DeleteObjects: Errors, each with its Key, Code and Message).
                first = refused[0]
                raise S3Error(
                    f"s3://{checkpoint.bucket}/{first.get('Key')}: {first.get('Code')}: {first.get('Message')} "
                    f"({len(refused)} of {len(batch['Objects'])} keys not deleted)",
                    str(first.get("Code") or ""),
                )

    def prune(self, keep: int) -> list[S3Checkpoint]:
        """Keep the newest `keep` complete checkpoints; delete older ones and every incomplete one (called after a
        commit, with no save of this run in flight). What was deleted."""
        found = self.all()
        complete = [checkpoint for checkpoint in found if checkpoint.complete]
        doomed = complete[: max(len(complete) - keep, 0)] + [c for c in found if not c.complete]
        for checkpoint in doomed:
            self.delete(checkpoint.uri)
        return doomed


def resume_source(uri: S3Uri, client: Any = None) -> S3Checkpoint | None:
    """What --resume-from names: a step_<N> checkpoint (if complete), else the newest complete checkpoint directly
    under the prefix, or under its checkpoints/ folder (a run's --artifacts-uri); None when there is none."""
    step = checkpoint_step(uri.name)
    if step is not None:
        parent = S3Uri(uri.bucket, uri.key.rstrip("/").rpartition("/")[0])
        complete = S3Checkpoints(parent, client).is_complete(uri)
        return S3Checkpoint(step, checkpoint_uri(parent, step), True) if complete else None
    for root in (uri, uri.join(CHECKPOINT_DIRECTORY)):
        complete = S3Checkpoints(root, client).complete()
        if complete:
            return complete[-1]
    return None
