"""The packed token stream that training reads: all documents' ids concatenated, with per token whether it is learnt,
cut into `seq_len` blocks (trainer/data/packing.py says how the stream is made and ordered)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trainer.errors import InputError

IGNORE_INDEX = -100  # the label value torch.nn.functional.cross_entropy skips


def samples_in(tokens: int, seq_len: int) -> int:
    """Whole sequences a stream of `tokens` ids makes: each needs its seq_len inputs and the next id as a label."""
    return max(0, (tokens - 1) // seq_len)


def require_samples(tokens: int, seq_len: int, what: str) -> None:
    """A stream too short for one training sequence is refused, naming the flag that made it."""
    if samples_in(tokens, seq_len) == 0:
        raise InputError(f"{what}: fewer than --seq-len {seq_len} + 1 tokens")


@dataclass
class PackedData:
    tokens: np.ndarray
    """All documents' token ids, concatenated (an integer array: int64 in memory, uint32 memory-mapped from the
    cache)."""
    trainable: np.ndarray
    """Per token: whether predicting it counts in the loss (bool)."""
    seq_len: int

    @property
    def num_samples(self) -> int:
        return samples_in(len(self.tokens), self.seq_len)

    def sample(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """(input ids, labels) of one packed sequence, both int64 whatever the stream's dtype (torch embeds int64
        ids); labels are IGNORE_INDEX where nothing is learnt."""
        start, end = index * self.seq_len, (index + 1) * self.seq_len
        targets = self.tokens[start + 1 : end + 1].astype(np.int64)
        labels = np.where(self.trainable[start + 1 : end + 1], targets, IGNORE_INDEX)
        return self.tokens[start:end].astype(np.int64), labels
