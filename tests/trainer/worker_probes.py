"""Tokenizers that act inside a data preparation worker (trainer/data/tokenise.py), where a test's monkeypatching does
not reach: the workers are forked by a fork server, which imports this module afresh."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from trainer.data.tokenizer_bytes import ByteTokenizer

KILL_TEXT = "the OOM killer strikes here"


def thread_count(pid: int) -> int:
    """The threads of process `pid` (the Threads line of /proc/<pid>/status, proc(5))."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise ValueError(f"/proc/{pid}/status has no Threads line")


class KilledAtATextTokenizer(ByteTokenizer):
    """Dies by SIGKILL, as the OOM killer kills, when a batch holds KILL_TEXT."""

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        if KILL_TEXT in texts:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().encode_batch(texts)


class ForkerTokenizer(ByteTokenizer):
    """Encodes each text as [the pid of the process that forked this one, that process's thread count now]."""

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        forker = os.getppid()
        return [[forker, thread_count(forker)] for _ in texts]
