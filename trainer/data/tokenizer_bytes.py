"""A byte-level tokenizer that needs no download: token id = UTF-8 byte value, plus a few special ids.

The `tiny` preset's vocabulary (260) is sized for it.
"""

from __future__ import annotations

from typing import Any

from trainer.base.errors import InputError

BOS_ID = 257
EOS_ID = 258
BYTE_VOCAB_SIZE = 260  # 256 byte values, pad, bos, eos, one reserved id
NO_CHAT_TEMPLATE = (
    "--dataset-format chat: the byte tokenizer has no chat template; give --tokenizer one that has (the model's "
    "-Instruct checkpoint's, for example), or use another --dataset-format"
)


class ByteTokenizer:
    name = "byte"
    fingerprint = "byte-v1"
    """What its ids depend on (the tokenised data cache's key, trainer/data/cache.py)."""
    vocab_size = BYTE_VOCAB_SIZE
    bos_id: int | None = BOS_ID
    eos_id: int | None = EOS_ID

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [list(text.encode("utf-8")) for text in texts]

    def chat_segments(self, messages: list[dict[str, Any]]) -> list[tuple[str, bool]]:
        raise InputError(NO_CHAT_TEMPLATE)

    def encode_chat(self, messages: list[dict[str, Any]]) -> tuple[list[int], list[bool]]:
        raise InputError(NO_CHAT_TEMPLATE)

    def decode(self, ids: list[int]) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")
