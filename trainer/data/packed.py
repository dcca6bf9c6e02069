"""The packed token stream that training reads: all documents' ids concatenated, with per token whether it is learnt,
cut into `seq_len` blocks (trainer/data/packing.py says how the stream is made and ordered)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

IGNORE_INDEX = -100  # the label value torch.nn.functional.cross_entropy skips


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
        return max(0, (len(self.tokens) - 1) // self.seq_len)

    def sample(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """(input ids, labels) of one packed sequence, both int64 whatever the stream's dtype (torch embeds int64
        ids); labels are IGNORE_INDEX where nothing is learnt."""
        start, end = index * self.seq_len, (index + 1) * self.seq_len
        targets = self.tokens[start + 1 : end + 1].astype(np.int64)
        labels = np.where(self.trainable[start + 1 : end + 1], targets, IGNORE_INDEX)
        return self.tokens[start:end].astype(np.int64), labels
