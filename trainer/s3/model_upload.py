"""The final model into S3: the run's Hugging Face export (config.json, *.safetensors and their index, the
tokenizer's files), every file, under `<--artifacts-uri>/model/`.

    aws s3 cp --recursive s3://<bucket>/<prefix>/<stack>/run-<n>/model/ ./model    # then from_pretrained("./model")

Rank 0 uploads after the export (trainer/train.py), with boto3's transfer manager: multipart and parallel for the
large weight files (trainer/s3/transfer.py upload_directory). The stack's output and the local run's summary name
the same URI through model_uri.
"""

from __future__ import annotations

import logging
from pathlib import Path

from trainer.s3.transfer import call, client, list_objects, upload_directory
from trainer.s3.uri import S3Uri

TORCH_FREE = True  # the stack's outputs and the local run's summary name the model's URI with it

MODEL_PREFIX = "model"

log = logging.getLogger(__name__)


def model_uri(artifacts_uri: str) -> S3Uri:
    """Where the run's final model lands: `<artifacts-uri>/model/` (a prefix)."""
    model = S3Uri.parse(artifacts_uri, "--artifacts-uri").join(MODEL_PREFIX)
    return S3Uri(model.bucket, model.prefix)


def upload_model(directory: Path, artifacts_uri: str) -> S3Uri:
    """Every file of the exported model to model_uri, then the keys there that this export did not write deleted (a
    run exported again with another shard count, or without LoRA's adapter, would otherwise leave files that
    `aws s3 cp --recursive` brings along); an S3Error (naming the URI and AWS's error) if any call fails."""
    target = model_uri(artifacts_uri)
    written = upload_directory(directory, target)
    kept = {uri.key for uri in written}
    stale = [S3Uri(target.bucket, item.key) for item in list_objects(target) if item.key not in kept]
    for uri in stale:
        call(uri, lambda uri=uri: client().delete_object(Bucket=uri.bucket, Key=uri.key))
    if stale:
        log.info("deleted %d files of an earlier export under %s", len(stale), target)
    log.info("model in %s (%d files)", target, len(written))
    return target
