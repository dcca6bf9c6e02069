"""The held-out split: which records are kept out of training for validation (--val-split).

A record is held out by its index in the data set's record order alone, through a keyed hash: the same records for
any world size and any --seq-len, decided while streaming (the number of records need not be known), and the same
record never lands in both streams. About `fraction` of the records are held out (each one independently, so the
count varies by about sqrt(n * fraction)).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from trainer.data.packed import PackedData

# A fixed key: another key would pick other records. Changing it changes every cached split (trainer/data/cache.py
# keys a split entry by the fraction, so bump its LAYOUT_VERSION with it).
SPLIT_KEY = b"fsdp-eks/val-split/v1"
HASH_BYTES = 8


def held_out_score(record_index: int) -> float:
    """The record's place in [0, 1), uniform over indices and independent of its neighbours'."""
    digest = hashlib.blake2b(record_index.to_bytes(8, "little"), key=SPLIT_KEY, digest_size=HASH_BYTES).digest()
    return int.from_bytes(digest, "little") / 2 ** (8 * HASH_BYTES)


def is_held_out(record_index: int, fraction: float) -> bool:
    """Whether record `record_index` (0-based, in the data set's order) belongs to the validation stream."""
    return fraction > 0 and held_out_score(record_index) < fraction


@dataclass(frozen=True)
class Splits:
    """The training stream, and the validation stream when there is one (--val-split or --val-dataset)."""

    train: PackedData
    val: PackedData | None
