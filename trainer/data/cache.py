"""The tokenised data set, once per job: written by one rank (or by `python -m trainer.stage` before the workers
start) as memory-mapped arrays on shared storage, and mapped by every rank.

Without it every rank of a 16-node job downloads the data set and tokenises all of it into memory before the process
group exists. With --data-cache-dir (shared by all ranks, like --checkpoint-dir):

    <data-cache-dir>/<key>/tokens.npy, trainable.npy, records.npy,   complete (a directory renamed into place)
                           meta.json                                 tokens: uint32 ids; records: each record's
                                                                     token count
    <data-cache-dir>/<key>.error                                     the data set was refused (the message)

The key is a digest of everything the token stream depends on: the data set (id, config and split, a local file's
path, size and modification time, or each staged S3 object's key, ETag and size), its format, the tokenizer's
fingerprint and this module's layout version; with --val-split also the fraction and which side of the split the
entry holds (its train and val entries are written from one pass; an entry without a split keeps the key it had).
A --val-dataset is an entry of its own, keyed as if it were the --dataset.
--seq-len is not in it: packing lays the same records out in blocks of any length (trainer/data/blocks.py), so one
entry serves every sequence length. Layout version 2 added records.npy (the records' bounds, which packing keeps
apart) and cuts chat records from one render of each conversation (trainer/data/tokenizer.py chat_pieces): an entry
of version 1 has another key, so it is never read, and the data set is tokenised again.
Global rank 0 tokenises if the entry is missing; the other ranks wait for the entry
(or for the error, which they raise alike) by polling the file system, since no process group exists yet.
Tokenising streams the records into the staging directory's files (trainer/data/prepare.py): the writer's memory
holds the batches in flight, not the data set.
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

from trainer.base.errors import InputError
from trainer.base.flags.config import DataConfig, ValidationConfig
from trainer.base.pod.attempt import attempt_id
from trainer.base.pod.env import DistEnv
from trainer.base.s3.inputs import staged
from trainer.base.s3.uri import is_s3_uri
from trainer.data.packed import no_samples
from trainer.data.packing import PackedData, check_enough, stream_names, val_dataset_config
from trainer.data.prepare import RECORDS, TOKENS, TRAINABLE, EntryFiles, prepare
from trainer.data.split import Splits
from trainer.data.tokenise import TOKEN_DTYPE, TokenStream
from trainer.data.tokenizer import Tokenizer

log = logging.getLogger(__name__)
LAYOUT_VERSION = 2
POLL_S = 1.0
META = "meta.json"
PARTS = ("train", "val")  # the streams of an entry pair, in the order tokenise_into_cache takes their keys


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
    trainer/base/pod/attempt.py): an error marker from another is stale."""
    return f"{os.environ.get('TORCHELASTIC_RUN_ID', 'local')}/{attempt_id(os.environ)}"


def map_entry(entry: Path, seq_len: int) -> PackedData:
    """The cached stream, memory-mapped read-only: the pages are shared by every rank on a node."""
    tokens = np.load(entry / TOKENS, mmap_mode="r")
    trainable = np.load(entry / TRAINABLE, mmap_mode="r")
    return PackedData(tokens, trainable, seq_len, np.load(entry / RECORDS))


class Staging:
    """A private directory an entry is written into, then renamed into place: an entry is complete or absent."""

    def __init__(self, directory: Path, key: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.entry = directory / key
        # A name of its own, not the PID: pods on different nodes share the directory, and containers' PIDs repeat
        # (each pod's first processes have the same small numbers), so one writer's rmtree would take another's.
        self.path = directory / f".{key}.{uuid.uuid4().hex}.tmp"
        self.path.mkdir()

    def commit(self, config: DataConfig, tokenizer: Tokenizer, part: str, tokens: int) -> Path:
        meta = {"dataset": config.dataset, "format": config.dataset_format, "tokenizer": tokenizer.name,
                "part": part, "tokens": tokens, "dtype": str(TOKEN_DTYPE), "created": time.time()}  # fmt: skip
        with (self.path / META).open("w") as handle:  # the marker readers wait for: durable before the rename
            json.dump(meta, handle, indent=2)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.rename(self.path, self.entry)
        except OSError:  # another writer got there first with the same contents
            self.discard()
        return self.entry

    def discard(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def write_entry(
    directory: Path, key: str, packed: PackedData, config: DataConfig, tokenizer: Tokenizer, part: str = "train"
) -> Path:
    """An entry of a stream already in memory."""
    staging = Staging(directory, key)
    files = EntryFiles(staging.path)
    files.append(TokenStream(packed.tokens, packed.trainable, packed.record_lengths))
    return staging.commit(config, tokenizer, part, files.close())


def refuse(directory: Path, keys: list[str], refused: InputError) -> None:
    """Leave the refusal where every waiting rank looks for it (each key's marker), for this attempt."""
    directory.mkdir(parents=True, exist_ok=True)
    for key in keys:
        (directory / f"{key}.error").write_text(json.dumps({"attempt": current_attempt(), "message": str(refused)}))


def tokenise_into_cache(
    config: DataConfig,
    tokenizer: Tokenizer,
    directory: Path,
    keys: list[str],
    names: list[str],
    flag: str = "--dataset",
    val_fraction: float = 0.0,
) -> list[Path]:
    """Stream the data set into one staging directory per key (the training stream's, then the held-out one's when
    `val_fraction` > 0), and rename them into place (the last key's last) once every stream is long enough. A
    refusal leaves its message under every key, for the ranks that wait."""
    for key in keys:
        (directory / f"{key}.error").unlink(missing_ok=True)
    stagings = [Staging(directory, key) for key in keys]
    try:
        files = [EntryFiles(staging.path) for staging in stagings]
        prepared = prepare(config, tokenizer, files[0], files[1] if len(files) > 1 else None, val_fraction, flag)
        counts = [stream.close() for stream in files]
        for stream, name in zip(files, names, strict=True):
            if stream.longest < 2:  # refused before it becomes an entry
                raise no_samples(name, config.seq_len)
    except BaseException as failure:
        for staging in stagings:
            staging.discard()
        if isinstance(failure, InputError):
            refuse(directory, keys, failure)
        raise
    # The held-out entry first: a rank that finds the training entry finds its held-out one too.
    committed = [
        staging.commit(config, tokenizer, part, count)
        for staging, part, count in reversed(list(zip(stagings, PARTS[: len(stagings)], counts, strict=True)))
    ]
    log.info(
        "tokenised %s: %d records in %.1fs, %s tokens into %s",
        config.dataset,
        prepared.records,
        prepared.seconds,
        " + ".join(str(count) for count in counts),
        ", ".join(str(entry) for entry in reversed(committed)),
    )
    return list(reversed(committed))


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


def build_entry(config: DataConfig, tokenizer: Tokenizer, directory: Path, flag: str = "--dataset") -> Path:
    """Tokenise into the cache (or find the entry there); a refused data set leaves its message for the others."""
    key = cache_key(config, tokenizer)
    if (directory / key / META).is_file():
        return directory / key
    return tokenise_into_cache(config, tokenizer, directory, [key], [f"{flag} {config.dataset}"], flag)[0]


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
    if all((directory / key / META).is_file() for key in (train_key, val_key)):
        return directory / train_key, directory / val_key
    names = list(stream_names(config, validation))
    train_entry, val_entry = tokenise_into_cache(
        config, tokenizer, directory, [train_key, val_key], names, val_fraction=validation.split
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
