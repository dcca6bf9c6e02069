"""Data preparation as a stream: records read a batch at a time, tokenised by worker processes
(trainer/data/tokenise.py), and the ids appended as they come to the training stream and to the held-out stream.

Into the cache (trainer/data/cache.py) the streams go to .npy files written incrementally: the file starts with the
header of an empty array, the ids are appended, and the header is rewritten with the final length at the end. A
first pass to count the ids (for np.lib.format.open_memmap) would tokenise everything twice, and growing a memmap
maps and copies; appending writes each id once, sequentially, which shared file systems (FSx for Lustre) serve best.
Memory then holds the batches in flight only, whatever the corpus size. Without a cache (every rank tokenising for
itself) the streams are collected in memory as 32-bit arrays, 5 bytes a token with the mask.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import BinaryIO, Protocol

import numpy as np

from trainer.base.errors import InputError
from trainer.base.flags.config import DataConfig
from trainer.data.formats import detect_format
from trainer.data.packed import PackedData
from trainer.data.records import RecordBatch, record_batches
from trainer.data.tokenise import TOKEN_DTYPE, Recipe, TokenStream, tokenised, worker_count
from trainer.data.tokenizer import Tokenizer

log = logging.getLogger(__name__)
TOKENS = "tokens.npy"
TRAINABLE = "trainable.npy"
RECORDS = "records.npy"
"""Each record's token count (int64), in stream order: where each record starts, for packing records apart."""


class StreamSink(Protocol):
    def append(self, stream: TokenStream) -> None: ...


class NpyAppender:
    """A 1-D .npy file written a piece at a time: np.load (mmap_mode too) reads it as one array once closed."""

    def __init__(self, path: Path, dtype: np.dtype) -> None:
        self.dtype = dtype
        self.length = 0
        self.file: BinaryIO = path.open("wb")
        self.header_bytes = self.write_header()

    def write_header(self) -> int:
        """The format 1.0 header padded to 64 bytes (numpy lib/format.py _wrap_header): 128 bytes for any length
        below 10^50, so the final one fits in the place of the first."""
        self.file.seek(0)
        header = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False, "shape": (self.length,)}
        np.lib.format.write_array_header_1_0(self.file, header)
        return self.file.tell()

    def append(self, values: np.ndarray) -> None:
        self.file.write(np.ascontiguousarray(values, dtype=self.dtype).tobytes())
        self.length += len(values)

    def close(self) -> int:
        if self.write_header() != self.header_bytes:
            raise AssertionError(f"{self.file.name}: the .npy header changed size")
        # On the disk before the entry is renamed into place: a node lost with the ids still in its page cache would
        # leave a complete-looking entry of missing ids on the shared file system, read by every later run.
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        return self.length


class EntryFiles:
    """The arrays of a cache entry, tokens.npy (32-bit ids), trainable.npy and records.npy, appended in step."""

    def __init__(self, directory: Path) -> None:
        self.tokens = NpyAppender(directory / TOKENS, TOKEN_DTYPE)
        self.trainable = NpyAppender(directory / TRAINABLE, np.dtype(bool))
        self.records = NpyAppender(directory / RECORDS, np.dtype(np.int64))
        self.longest = 0

    def append(self, stream: TokenStream) -> None:
        self.tokens.append(stream.ids)
        self.trainable.append(stream.trainable)
        self.records.append(stream.record_lengths)
        self.longest = max(self.longest, int(stream.record_lengths.max(initial=0)))

    def close(self) -> int:
        self.trainable.close()
        self.records.close()
        return self.tokens.close()


class InMemory:
    """The stream's pieces kept, joined at the end."""

    def __init__(self) -> None:
        self.pieces: list[TokenStream] = []

    def append(self, stream: TokenStream) -> None:
        if len(stream.ids):
            self.pieces.append(stream)

    def packed(self, seq_len: int) -> PackedData:
        pieces = self.pieces or [TokenStream.empty()]
        ids = np.concatenate([piece.ids for piece in pieces])
        trainable = np.concatenate([piece.trainable for piece in pieces])
        records = np.concatenate([piece.record_lengths for piece in pieces])
        self.pieces = []
        return PackedData(ids, trainable, seq_len, records)


@dataclass(frozen=True)
class Prepared:
    records: int
    train_tokens: int
    val_tokens: int
    seconds: float


def prepare(
    config: DataConfig,
    tokenizer: Tokenizer,
    train: StreamSink,
    val: StreamSink | None = None,
    val_fraction: float = 0.0,
    flag: str = "--dataset",
) -> Prepared:
    """Tokenise the data set `config` names into `train` (and the records held out by `val_fraction` into `val`)."""
    started = time.perf_counter()
    batches = record_batches(config, flag)
    first = next(batches, None)
    if first is None or not len(first):
        raise InputError(f"{flag} {config.dataset}: no records")
    data_format = config.dataset_format
    if data_format == "auto":
        data_format = detect_format(first.parsed()[0])
    recipe = Recipe(tokenizer, data_format, val_fraction if val is not None else 0.0)
    records = train_tokens = val_tokens = 0

    def reading() -> Iterator[RecordBatch]:
        nonlocal records
        for batch in chain([first], batches):
            records = batch.first_index + len(batch)
            yield batch

    for batch_tokens in tokenised(reading(), recipe, worker_count(config.workers)):
        train.append(batch_tokens.train)
        train_tokens += len(batch_tokens.train.ids)
        if val is not None:
            val.append(batch_tokens.val)
            val_tokens += len(batch_tokens.val.ids)
    return Prepared(records, train_tokens, val_tokens, time.perf_counter() - started)
