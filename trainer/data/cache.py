"""The tokenised data set, once per job: written by one rank (or by `python -m trainer.stage` before the workers
start) as memory-mapped arrays on shared storage, and mapped by every rank.

Without it every rank of a 16-node job downloads the data set and tokenises all of it into Python lists before the
process group exists. With --data-cache-dir (shared by all ranks, like --checkpoint-dir):

    <data-cache-dir>/<key>/tokens.npy, trainable.npy, meta.json      complete (a directory renamed into place)
    <data-cache-dir>/<key>.error                                     the data set was refused (the message)

The key is a digest of everything the token stream depends on: the data set (id, config and split, a local file's
path, size and modification time, or each staged S3 object's key, ETag and size), its format, the tokenizer's
fingerprint and this module's layout version.
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

from trainer.config import DataConfig
from trainer.data.packing import PackedData, build_packed_data
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


def cache_key(config: DataConfig, tokenizer: Tokenizer) -> str:
    identity = {
        "version": LAYOUT_VERSION,
        **dataset_identity(config),
        "format": config.dataset_format,
        "tokenizer": tokenizer.fingerprint,
    }
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


def write_entry(directory: Path, key: str, packed: PackedData, config: DataConfig, tokenizer: Tokenizer) -> Path:
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
            "tokens": len(packed.tokens), "created": time.time()}  # fmt: skip
    (staging / META).write_text(json.dumps(meta, indent=2))
    try:
        os.rename(staging, entry)
    except OSError:  # another writer got there first with the same contents
        shutil.rmtree(staging, ignore_errors=True)
    return entry


def build_entry(config: DataConfig, tokenizer: Tokenizer, directory: Path) -> Path:
    """Tokenise into the cache (or find the entry there); a refused data set leaves its message for the others."""
    key = cache_key(config, tokenizer)
    entry, error = directory / key, directory / f"{key}.error"
    if (entry / META).is_file():
        return entry
    error.unlink(missing_ok=True)
    started = time.perf_counter()
    try:
        packed = build_packed_data(config, tokenizer)
    except InputError as refused:
        directory.mkdir(parents=True, exist_ok=True)
        error.write_text(json.dumps({"attempt": current_attempt(), "message": str(refused)}))
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


def wait_for_entry(config: DataConfig, tokenizer: Tokenizer, directory: Path, timeout_s: float) -> Path:
    """Until rank 0 (or a stage step) has written the entry; its refusal of the data set is raised here too."""
    key = cache_key(config, tokenizer)
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


def cached_packed_data(
    config: DataConfig, tokenizer: Tokenizer, directory: Path, env: DistEnv, timeout_s: float
) -> PackedData:
    """Every rank maps the one tokenised copy; global rank 0 makes it when it is missing."""
    if env.is_leader:
        entry = build_entry(config, tokenizer, directory)
    else:
        entry = wait_for_entry(config, tokenizer, directory, timeout_s)
    packed = map_entry(entry, config.seq_len)
    if packed.num_samples == 0:
        raise InputError(f"--dataset {config.dataset}: fewer than --seq-len {config.seq_len} + 1 tokens")
    return packed
