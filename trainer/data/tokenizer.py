"""Tokenizers behind one small interface: the built-in byte tokenizer, or any Hugging Face tokenizer."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol

from trainer.data.tokenizer_bytes import ByteTokenizer
from trainer.model.source import BYTE_TOKENIZER


class Tokenizer(Protocol):
    name: str
    fingerprint: str
    """Identifies the mapping from text to ids (the tokenised data cache is keyed by it)."""
    vocab_size: int
    bos_id: int | None
    eos_id: int | None

    def encode(self, text: str) -> list[int]: ...


class HFTokenizer:
    """A transformers tokenizer; special tokens are added by the data pipeline, not by encode()."""

    def __init__(self, name: str) -> None:
        from transformers import AutoTokenizer

        self.name = name
        self._tokenizer: Any = AutoTokenizer.from_pretrained(name)
        self.vocab_size = len(self._tokenizer)
        self.bos_id = self._tokenizer.bos_token_id
        self.eos_id = self._tokenizer.eos_token_id
        self.fingerprint = tokenizer_fingerprint(self._tokenizer)

    def encode(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False))

    def save_pretrained(self, directory: str) -> None:
        self._tokenizer.save_pretrained(directory)


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """A digest of everything that decides the ids: the fast tokenizer's full serialisation (vocabulary, merges,
    normalisation, pre-tokenisation) with the special tokens, or, for a slow one, its class, files and vocabulary."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    parts = [type(tokenizer).__name__, str(len(tokenizer)), str(tokenizer.bos_token_id), str(tokenizer.eos_token_id)]
    if backend is not None:
        parts.append(backend.to_str())
    else:
        parts.append(json.dumps(sorted(tokenizer.get_vocab().items())))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def load_tokenizer(name: str) -> Tokenizer:
    return ByteTokenizer() if name == BYTE_TOKENIZER else HFTokenizer(name)
