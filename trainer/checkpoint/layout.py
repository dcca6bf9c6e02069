"""Checkpoint directory layout and meta.json, without torch (validation reads them before any work).

    <checkpoint-dir>/
        step_00000040/         complete: DCP shards (*.distcp), .metadata, meta.json
        step_00000050.tmp/     a save in progress, or one that crashed: never read, deleted by the next save
        step_00000040.superseded/  an older save of a step saved again, moved aside by a commit: never read, deleted

A save writes `step_<N>.tmp`, and rank 0 renames it to `step_<N>` once every rank has finished writing. The
rename is the commit: a directory without a suffix is always complete. A step saved again (a run that resumed from
an earlier step) replaces the older directory by renames only (`commit_directory`), so no kill leaves a step_<N>
half deleted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

from trainer.base.model.presets import ModelShape

META_FILE = "meta.json"
PROVENANCE_FILE = "provenance.json"
"""Which training step the exported weights are from (with --keep-best, the best evaluation's, not the last step's)
and its held-out loss: machine-readable beside the weights, in the export and its copy in S3
(trainer/checkpoint/export.py writes it; the local run's report reads it)."""
# DCP's own metadata file (torch/distributed/checkpoint/filesystem.py `_metadata_fn`): rank 0 writes it (under a
# temporary name, then renamed) only after gathering every rank's successful write (trainer/checkpoint/commit.py).
DCP_METADATA_FILE = ".metadata"
TMP_SUFFIX = ".tmp"
SUPERSEDED_SUFFIX = ".superseded"
# What a crash or a superseded save leaves beside the complete checkpoints: never read, deleted by the next save.
LEFTOVER_SUFFIXES = (TMP_SUFFIX, SUPERSEDED_SUFFIX)
_COMPLETE = re.compile(r"^step_(\d{8})$")
# The architecture numbers a checkpoint's tensors depend on; the name and hub id do not matter.
FINGERPRINT_FIELDS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_layers",
    "num_heads",
    "num_kv_heads",
    "tie_word_embeddings",
)


def checkpoint_name(step: int) -> str:
    return f"step_{step:08d}"


def checkpoint_step(name: str) -> int | None:
    """The step of a complete checkpoint's name (step_<N>), None for any other name (a .tmp directory)."""
    match = _COMPLETE.match(name)
    return int(match.group(1)) if match else None


def model_fingerprint(shape: ModelShape) -> dict[str, Any]:
    values = asdict(shape)
    return {name: values[name] for name in FINGERPRINT_FIELDS}


def complete_checkpoints(directory: str | Path) -> list[tuple[int, Path]]:
    """(step, path) of every complete checkpoint, oldest first; .tmp directories are ignored."""
    root = Path(directory)
    if not root.is_dir():
        return []
    found = []
    for child in root.iterdir():
        step = checkpoint_step(child.name)
        if step is not None and child.is_dir() and (child / META_FILE).is_file():
            found.append((step, child))
    return sorted(found)


def leftover_directories(directory: str | Path) -> list[Path]:
    """The saves that crashed (.tmp) and the older copies a commit moved aside (.superseded): never read."""
    root = Path(directory)
    return sorted(path for suffix in LEFTOVER_SUFFIXES for path in root.glob(f"step_*{suffix}") if path.is_dir())


def commit_directory(tmp: Path, final: Path) -> None:
    """Make the written save `tmp` the complete checkpoint `final` by renames alone: an older `final` (the same step
    saved before) is moved aside first, then `tmp` renamed into place, and only then is the older copy deleted. A
    kill at any point leaves either the older complete checkpoint, or none of this step and a leftover directory
    that is never read: never a step_<N> whose meta.json survives its shards' deletion."""
    aside = final.with_name(final.name + SUPERSEDED_SUFFIX)
    if final.exists():
        shutil.rmtree(aside, ignore_errors=True)  # left by a kill after an earlier move aside
        os.rename(final, aside)
    os.rename(tmp, final)
    shutil.rmtree(aside, ignore_errors=True)


def latest_checkpoint(directory: str | Path | None) -> tuple[int, Path] | None:
    if directory is None:
        return None
    checkpoints = complete_checkpoints(directory)
    return checkpoints[-1] if checkpoints else None


def read_meta(checkpoint: Path) -> dict[str, Any]:
    return json.loads((checkpoint / META_FILE).read_text())


def write_meta(checkpoint: Path, meta: dict[str, Any]) -> None:
    """Write meta.json durably (the rename that follows must not overtake the file's contents)."""
    path = checkpoint / META_FILE
    with open(path, "w") as handle:
        json.dump(meta, handle, indent=2, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())


def incompatibility(meta: dict[str, Any], shape: ModelShape, lora: dict[str, Any] | None = None) -> str | None:
    """Why a checkpoint cannot be loaded into a model of `shape` trained with `lora` (LoraConfig.settings: None for
    full fine-tuning), or None if it can."""
    return fingerprint_difference(meta, model_fingerprint(shape)) or lora_difference(meta, lora)


def describe_lora(settings: dict[str, Any] | None) -> str:
    if not settings:
        return "full fine-tuning"
    return f"LoRA rank {settings['rank']}, alpha {settings['alpha']}, targets {','.join(settings['targets'])}"


def lora_difference(meta: dict[str, Any], wanted: dict[str, Any] | None) -> str | None:
    """How a checkpoint's LoRA settings differ from `wanted`, or None. A LoRA checkpoint holds the adapters and not
    the base, a full one the base and no adapters: neither resumes as the other, nor with another rank or targets
    (another alpha would silently rescale what was learnt). Checkpoints from before LoRA have no key: full."""
    saved = meta.get("lora")
    if saved == wanted:
        return None
    return f"saved with {describe_lora(saved)}, this run uses {describe_lora(wanted)}"


def fingerprint_difference(meta: dict[str, Any], wanted: dict[str, Any]) -> str | None:
    """How a checkpoint's model fingerprint differs from `wanted` (model_fingerprint's), or None if it does not."""
    saved = meta.get("model", {})
    different = [
        f"{key} {saved.get(key)} != {wanted[key]}" for key in FINGERPRINT_FIELDS if saved.get(key) != wanted[key]
    ]
    return ", ".join(different) or None
