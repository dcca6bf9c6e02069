"""Tokenizers behind one small interface: the built-in byte tokenizer, or any Hugging Face tokenizer."""

from __future__ import annotations

from typing import Any, Protocol

from trainer.model_source import BYTE_TOKENIZER
from trainer.tokenizer_bytes import ByteTokenizer


class Tokenizer(Protocol):
    name: str
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

    def encode(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False))

    def save_pretrained(self, directory: str) -> None:
        self._tokenizer.save_pretrained(directory)


def load_tokenizer(name: str) -> Tokenizer:
    return ByteTokenizer() if name == BYTE_TOKENIZER else HFTokenizer(name)
