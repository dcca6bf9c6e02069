"""Records laid out in blocks of --seq-len positions, each record apart: which stream tokens each block holds.

A record of n tokens makes n - 1 predictions: position j reads token j and learns token j + 1, so it takes n - 1
positions (its last token is a label only) and nothing predicts its first. A block holds whole records, its positions
counting from 0 at each record's start, and the attention keeps each record to itself (trainer/model/attention.py):
a record's predictions are those of a forward on it alone, whichever records share its block. What is left of a
block after its records is padding, its labels ignored.

A record longer than a block:
- with nothing masked after its first token (a text record: at most its begin-of-text token is masked) it is cut
  into pieces of --seq-len positions, each a record of its own (as a long document is in pre-training);
- otherwise (a prompt and a response, a conversation) it keeps its first --seq-len positions and the rest is not
  trained: a later piece would be a response whose prompt was cut away.

Blocks are filled by best-fit decreasing (each piece, longest first, into the open block it fills most tightly), a
bin packing within 11/9 of the fewest blocks (Johnson 1973, for first-fit decreasing; best-fit decreasing has the
same bound) where the records' order would leave about half a record of padding per block.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Blocks:
    """Segments (runs of consecutive stream tokens, each one record or piece) grouped into blocks."""

    starts: np.ndarray
    """Each segment's first input token in the stream (int64), block by block."""
    lengths: np.ndarray
    """Each segment's positions (int64): it reads tokens [start, start + length) and learns [start + 1, ... + 1)."""
    bounds: np.ndarray
    """Block b holds segments bounds[b]:bounds[b + 1] (int64, one more than the blocks)."""
    truncated: int
    """Records with a prompt longer than a block: trained on their first --seq-len positions only."""

    @property
    def count(self) -> int:
        return len(self.bounds) - 1

    def filled(self) -> int:
        """Positions that hold a record (the rest is padding)."""
        return int(self.lengths.sum())


def record_starts(record_lengths: np.ndarray) -> np.ndarray:
    """Each record's first token in the stream."""
    starts = np.zeros(len(record_lengths), dtype=np.int64)
    np.cumsum(record_lengths[:-1], out=starts[1:])
    return starts


def splittable(trainable: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Per record (each of at least one token): whether every token after its first is trained (nothing of it is a
    prompt that a later piece would lose)."""
    if not len(starts):
        return np.zeros(0, dtype=bool)
    masked = np.add.reduceat((~trainable.astype(bool)).astype(np.int64), starts)
    first_masked = ~trainable[starts].astype(bool)
    return masked - first_masked == 0


def segments(record_lengths: np.ndarray, trainable: np.ndarray, seq_len: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(starts, lengths, truncated): every record of two tokens or more as segments of at most seq_len positions."""
    lengths = np.asarray(record_lengths, dtype=np.int64)
    starts = record_starts(lengths)
    kept = lengths >= 2  # a record of one token predicts nothing
    starts, lengths = starts[kept], lengths[kept]
    positions = lengths - 1
    long = positions > seq_len
    cut = long & splittable(trainable, starts, lengths)
    truncated = int((long & ~cut).sum())
    pieces = np.where(cut, -(-positions // seq_len), 1)
    first = np.repeat(starts, pieces)
    index = np.arange(int(pieces.sum())) - np.repeat(np.cumsum(pieces) - pieces, pieces)  # piece index in record
    offsets = index * seq_len
    piece_lengths = np.minimum(np.repeat(positions, pieces) - offsets, seq_len)
    return first + offsets, piece_lengths, truncated


def best_fit_decreasing(lengths: np.ndarray, capacity: int) -> np.ndarray:
    """The block of each item (sizes 1..capacity): longest first, each into the open block with the least room that
    still holds it, else a new block. Blocks are numbered in the order they open. Deterministic: ties go in index
    order."""
    order = np.argsort(-lengths, kind="stable")
    block_of = np.empty(len(lengths), dtype=np.int64)
    open_blocks: dict[int, list[int]] = {}  # room left -> the open blocks with that much room
    rooms: list[int] = []  # the keys of open_blocks, sorted
    opened = 0
    for item, size in zip(order.tolist(), lengths[order].tolist(), strict=True):
        at = bisect_left(rooms, size)
        if at == len(rooms):
            block, left = opened, capacity - size
            opened += 1
        else:
            room = rooms[at]
            waiting = open_blocks[room]
            block, left = waiting.pop(), room - size
            if not waiting:
                del open_blocks[room]
                rooms.pop(at)
        block_of[item] = block
        if left:
            if left not in open_blocks:
                open_blocks[left] = []
                insort(rooms, left)
            open_blocks[left].append(block)
    return block_of


def pack_blocks(record_lengths: np.ndarray, trainable: np.ndarray, seq_len: int) -> Blocks:
    """The block layout of a stream of records (record_lengths tokens each, in stream order)."""
    starts, lengths, truncated = segments(record_lengths, trainable, seq_len)
    block_of = best_fit_decreasing(lengths, seq_len)
    order = np.argsort(block_of, kind="stable")  # a block's segments in stream order
    counts = np.bincount(block_of, minlength=int(block_of.max()) + 1 if len(block_of) else 0)
    bounds = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=bounds[1:])
    return Blocks(starts[order], lengths[order], bounds, truncated)
