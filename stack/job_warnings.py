"""What preview warns about in a job that is valid but probably not what its author meant.

A preset (trainer/base/model/presets.py) is a model's shape with random weights (trainer/base/model/source.py
resolve_model): trained on a real data set it learns from scratch, which a fine-tuning run never wants. The same name's
hub id loads the published weights.
"""

from __future__ import annotations

from stack.config import JobConfig
from stack.fields import NAMESPACE
from trainer.base.model.presets import PRESETS

SYNTHETIC_DATASET = "synthetic"  # the trainer's generated data set (trainer/data/records.py): for smoke tests


def random_preset_warning(job: JobConfig) -> str | None:
    """The warning for a preset trained on a real data set; None for a pretrained model or the synthetic data."""
    preset = PRESETS.get(job.model)
    if preset is None or job.dataset == SYNTHETIC_DATASET:
        return None
    pretrained = (
        f"for its published weights set {NAMESPACE}:job.model {preset.hf_id}"
        if preset.hf_id
        else "for fine-tuning set a hub id or an s3:// model directory"
    )
    return (
        f"{NAMESPACE}:job.model {job.model!r} is a preset: random weights in {preset.name}'s shape, so the job trains "
        f"it from scratch on {job.dataset}; {pretrained} (docs/data.md)"
    )


def job_warnings(job: JobConfig) -> list[str]:
    """Every preview warning about the job's model and data, each naming the key and the fix."""
    return [warning for warning in (random_preset_warning(job),) if warning]
