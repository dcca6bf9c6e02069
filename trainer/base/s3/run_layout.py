"""Where a run keeps its durable artifacts under its --artifacts-uri: the checkpoints, the final model and the record.

    <artifacts-uri>/checkpoints/step_<N>/   the durable checkpoints (trainer/checkpoint/s3_store.py)
    <artifacts-uri>/model/                  the final model in Hugging Face format (trainer/base/s3/model_upload.py)
    <artifacts-uri>/record/                 the metrics, the summary and the chart (trainer/record/archive.py)

The trainer writes there; the stack's outputs and the pods' S3 access name the same keys (stack/artifacts.py,
workloads/platform/objects.py artifacts_commands).
"""

from __future__ import annotations

CHECKPOINT_DIRECTORY = "checkpoints"
MODEL_DIRECTORY = "model"
RECORD_DIRECTORY = "record"
