"""The tokenised data set, once per job: written by one rank (or by `python -m trainer.stage` before the workers
start) as memory-mapped arrays on shared storage, and mapped by every rank.

Without it every rank of a 16-node job downloads the data set and tokenises all of it into Python lists before the
process group exists. With --data-cache-dir (shared by all ranks, like --checkpoint-dir):

    <data-cache-dir>/<key>/tokens.npy, trainable.npy, meta.json      complete (a directory renamed into place)
    <data-cache-dir>/<key>.error                                     the data set was refused (the message)

The key is a digest of everything the token stream depends on: the data set (id, config and split, a local file's
path, size and modification time, or each staged S3 object's key, ETag and size), its format, the tokenizer's
fingerprint and this module's layout version; with --val-split also the fraction and which side of the split the
entry holds (its train and val entries are written from one pass; an entry without a split keeps the key it had).
A --val-dataset is an entry of its own, keyed as if it were the --dataset.
--seq-len is not in it: packing cuts the same stream into blocks of any length (trainer/data/packing.py), so one entry
serves every sequence length. Global rank 0 tokenises if the entry is missing; the other ranks wait for the entry
(or for the error, which they raise alike) by polling the file system, since no process group exists yet.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from pathlib import Path

import numpy as np

from trainer.config import DataConfig, ValidationConfig
from trainer.data.packing import (
    PackedData,
    build_packed_data,
    build_splits,
    check_enough,
    stream_names,
    val_dataset_config,
)
from trainer.data.split import Splits
from trainer.data.tokenizer import Tokenizer
from trainer.env import DistEnv
from trainer.errors import InputError
from trainer.launch.attempt import attempt_id
from trainer.s3.inputs import staged
from trainer.s3.uri import is_s3_uri

log = logging.getLogger(__name__)
LAYOUT_VERSION = 1
POLL_S = 1.0
META = "meta.json"


def dataset_identity(config: DataConfig) -> dict[str, object]:
    """What names the data set's records: a hub id with its config and split, a local file as it is now, or the
    objects of an s3:// data set as staged (each one's ETag and size: a changed object is tokenised again)."""
    if is_s3_uri(config.dataset):
        return staged(config.dataset, "--dataset", config.cache_dir)[0].identity()
    path = Path(config.dataset).expanduser()
    if config.dataset != "synthetic" and path.is_file():
        stat = path.stat()
        return {"file": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    return {"dataset": config.dataset, "config": config.dataset_config, "split": config.dataset_split}


def cache_key(config: DataConfig, tokenizer: Tokenizer, split: float = 0.0, part: str = "train") -> str:
    """The entry's name. `split` (the --val-split fraction) and `part` ("train" or "val", which side of it) enter
    only when there is a split, so an entry without one keeps the key it had before splits existed."""
    identity: dict[str, object] = {
        "version": LAYOUT_VERSION,
        **dataset_identity(config),
        "format": config.dataset_format,
        "tokenizer": tokenizer.fingerprint,
    }
    if split > 0:
        identity |= {"val_split": split, "part": part}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]


def current_attempt() -> str:
    """This start of the job's workers (torchrun's run id and the attempt id every rank agrees on,
    trainer/launch/attempt.py): an error marker from another is stale."""
    return f"{os.environ.get('TORCHELASTIC_RUN_ID', 'local')}/{attempt_id(os.environ)}"


def map_entry(entry: Path, seq_len: int) -> PackedData:
    """The cached stream, memory-mapped read-only: the pages are shared by every rank on a node."""
    tokens = np.load(entry / "tokens.npy", mmap_mode="r")
    trainable = np.load(entry / "trainable.npy", mmap_mode="r")
    return PackedData(tokens, trainable, seq_len)


def write_entry(
    directory: Path, key: str, packed: PackedData, config: DataConfig, tokenizer: Tokenizer, part: str = "train"
) -> Path:
    """Write the arrays into a private directory, then rename it into place: an entry is complete or absent."""
    directory.mkdir(parents=True, exist_ok=True)
    entry = directory / key
    # A name of its own, not the PID: pods on different nodes share the directory, and containers' PIDs repeat
    # (each pod's first processes have the same small numbers), so one writer's rmtree would take another's files.
    staging = directory / f".{key}.{uuid.uuid4().hex}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    np.save(staging / "tokens.npy", np.ascontiguousarray(packed.tokens))
    np.save(staging / "trainable.npy", np.ascontiguousarray(packed.trainable))
    meta = {"dataset": config.dataset, "format": config.dataset_format, "tokenizer": tokenizer.name,
            "part": part, "tokens": len(packed.tokens), "created": time.time()}  # fmt: skip
    (staging / META).write_text(json.dumps(meta, indent=2))
    try:
        os.rename(staging, entry)
    except OSError:  # another writer got there first with the same contents
        shutil.rmtree(staging, ignore_errors=True)
    return entry


def refuse(directory: Path, keys: list[str], refused: InputError) -> None:
    """Leave the refusal where every waiting rank looks for it (each key's marker), for this attempt."""
    directory.mkdir(parents=True, exist_ok=True)
    for key in keys:
        (directory / f"{key}.error").write_text(json.dumps({"attempt": current_attempt(), "message": str(refused)}))


def build_entry(config: DataConfig, tokenizer: Tokenizer, directory: Path, flag: str = "--dataset") -> Path:
    """Tokenise into the cache (or find the entry there); a refused data set leaves its message for the others."""
    key = cache_key(config, tokenizer)
    entry = directory / key
    if (entry / META).is_file():
        return entry
    (directory / f"{key}.error").unlink(missing_ok=True)
    started = time.perf_counter()
    try:
        packed = build_packed_data(config, tokenizer, flag)
    except InputError as refused:
        refuse(directory, [key], refused)
        raise
    write_entry(directory, key, packed, config, tokenizer)
    log.info(
        "tokenised %s into %s: %d tokens in %.1fs",
        config.dataset,
        entry,
        len(packed.tokens),
        time.perf_counter() - started,
    )
    return entry


def split_keys(config: DataConfig, validation: ValidationConfig, tokenizer: Tokenizer) -> tuple[str, str | None]:
    """The entries of the training stream and of the validation stream (None without one)."""
    if validation.dataset:
        return cache_key(config, tokenizer), cache_key(val_dataset_config(config, validation), tokenizer)
    if validation.split > 0:
        return (
            cache_key(config, tokenizer, validation.split, "train"),
            cache_key(config, tokenizer, validation.split, "val"),
        )
    return cache_key(config, tokenizer), None


def build_split_entries(
    config: DataConfig, validation: ValidationConfig, tokenizer: Tokenizer, directory: Path
) -> tuple[Path, Path | None]:
    """The training and validation entries, tokenised where missing: a --val-dataset as an entry of its own, a
    --val-split's two sides from one pass over the records."""
    if validation.dataset:
        val_config = val_dataset_config(config, validation)
        return build_entry(config, tokenizer, directory), build_entry(val_config, tokenizer, directory, "--val-dataset")
    if validation.split <= 0:
        return build_entry(config, tokenizer, directory), None
    train_key, val_key = split_keys(config, validation, tokenizer)
    assert val_key is not None
    train_entry, val_entry = directory / train_key, directory / val_key
    if (train_entry / META).is_file() and (val_entry / META).is_file():
        return train_entry, val_entry
    for key in (train_key, val_key):
        (directory / f"{key}.error").unlink(missing_ok=True)
    started = time.perf_counter()
    try:
        splits = build_splits(config, validation, tokenizer)
    except InputError as refused:
        refuse(directory, [train_key, val_key], refused)
        raise
    assert splits.val is not None
    # The val side first: a reader that finds the train entry finds its val entry too.
    write_entry(directory, val_key, splits.val, config, tokenizer, "val")
    write_entry(directory, train_key, splits.train, config, tokenizer, "train")
    log.info(
        "tokenised %s into %s (train, %d tokens) and %s (val, %d tokens) in %.1fs",
        config.dataset,
        train_entry,
        len(splits.train.tokens),
        val_entry,
        len(splits.val.tokens),
        time.perf_counter() - started,
    )
    return train_entry, val_entry


def wait_for_key(key: str, directory: Path, timeout_s: float) -> Path:
    """Until rank 0 (or a stage step) has written the entry; its refusal of the data set is raised here too."""
    entry, error = directory / key, directory / f"{key}.error"
    deadline = time.monotonic() + timeout_s
    while not (entry / META).is_file():
        if error.is_file():
            marker = json.loads(error.read_text())
            if marker.get("attempt") == current_attempt():
                raise InputError(marker["message"])
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"--data-cache-dir {directory}: no tokenised data set {key} after {timeout_s:.0f}s; is the directory "
                "shared by all ranks?"
            )
        time.sleep(POLL_S)
    return entry


def wait_for_entry(config: DataConfig, tokenizer: Tokenizer, directory: Path, timeout_s: float) -> Path:
    return wait_for_key(cache_key(config, tokenizer), directory, timeout_s)


def cached_packed_data(
    config: DataConfig, tokenizer: Tokenizer, directory: Path, env: DistEnv, timeout_s: float
) -> PackedData:
    """Every rank maps the one tokenised copy; global rank 0 makes it when it is missing."""
    if env.is_leader:
        entry = build_entry(config, tokenizer, directory)
    else:
        entry = wait_for_entry(config, tokenizer, directory, timeout_s)
    return check_enough(map_entry(entry, config.seq_len), f"--dataset {config.dataset}")


def cached_splits(
    config: DataConfig,
    validation: ValidationConfig,
    tokenizer: Tokenizer,
    directory: Path,
    env: DistEnv,
    timeout_s: float,
) -> Splits:
    """Every rank maps the one tokenised copy of each stream; global rank 0 makes what is missing."""
    if env.is_leader:
        train_entry, val_entry = build_split_entries(config, validation, tokenizer, directory)
    else:
        train_key, val_key = split_keys(config, validation, tokenizer)
        train_entry = wait_for_key(train_key, directory, timeout_s)
        val_entry = wait_for_key(val_key, directory, timeout_s) if val_key else None
    train_name, val_name = stream_names(config, validation)
    train = check_enough(map_entry(train_entry, config.seq_len), train_name)
    if val_entry is None:
        return Splits(train, None)
    return Splits(train, check_enough(map_entry(val_entry, config.seq_len), val_name))
