"""The packed data that training reads: all records' ids in one stream, per token whether it is learnt, each
record's length, and the blocks of `seq_len` positions the records are laid out in (trainer/data/blocks.py; how the
stream is made and ordered: trainer/data/packing.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from trainer.base.errors import InputError
from trainer.data.blocks import Blocks, pack_blocks

IGNORE_INDEX = -100  # the label value torch.nn.functional.cross_entropy skips
PAD_ID = 0
"""The input id of a block's padding: any id of the vocabulary does, no label and no other record sees it."""


class Sample(NamedTuple):
    """One block ([seq_len] each), or a batch of them ([batch, seq_len]); int64 throughout (torch embeds int64 ids)."""

    inputs: np.ndarray
    labels: np.ndarray
    """The next token of each position's record, IGNORE_INDEX where nothing is learnt (prompts, padding)."""
    positions: np.ndarray
    """Each position's place in its record, 0 at each record's start (and at the padding's): the rotary positions,
    and where the attention's documents begin."""


def stack(samples: list[Sample]) -> Sample:
    return Sample(*(np.stack(column) for column in zip(*samples, strict=True)))


def no_samples(what: str, seq_len: int) -> InputError:
    return InputError(f"{what}: no record of 2 tokens or more, nothing to train on (--seq-len {seq_len})")


def require_records(record_lengths: np.ndarray, seq_len: int, what: str) -> None:
    """A stream with no record that predicts a token is refused, naming the flag that made it."""
    if not (np.asarray(record_lengths) >= 2).any():
        raise no_samples(what, seq_len)


@dataclass
class PackedData:
    tokens: np.ndarray
    """All records' token ids, concatenated (an integer array: int64 in memory, uint32 memory-mapped from the
    cache)."""
    trainable: np.ndarray
    """Per token: whether predicting it counts in the loss (bool)."""
    seq_len: int
    record_lengths: np.ndarray
    """Each record's tokens, in stream order (they add up to len(tokens))."""
    _blocks: Blocks | None = field(default=None, init=False, repr=False)

    @property
    def blocks(self) -> Blocks:
        """The layout, computed once (from the lengths and the mask alone: every rank computes the same)."""
        if self._blocks is None:
            self._blocks = pack_blocks(self.record_lengths, self.trainable, self.seq_len)
        return self._blocks

    @property
    def num_samples(self) -> int:
        return self.blocks.count

    def sample(self, index: int) -> Sample:
        """Block `index`: its records' inputs, labels and positions, then padding."""
        blocks = self.blocks
        segments = slice(int(blocks.bounds[index]), int(blocks.bounds[index + 1]))
        starts, lengths = blocks.starts[segments], blocks.lengths[segments]
        filled = int(lengths.sum())
        positions = np.arange(filled) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        read = np.repeat(starts, lengths) + positions
        targets = self.tokens[read + 1].astype(np.int64)
        padding = self.seq_len - filled
        inputs = np.concatenate([self.tokens[read].astype(np.int64), np.full(padding, PAD_ID, dtype=np.int64)])
        labels = np.concatenate(
            [np.where(self.trainable[read + 1], targets, IGNORE_INDEX), np.full(padding, IGNORE_INDEX, dtype=np.int64)]
        )
        return Sample(inputs, labels, np.concatenate([positions, np.arange(padding)]).astype(np.int64))
