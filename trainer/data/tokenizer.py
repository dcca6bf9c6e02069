"""Tokenizers behind one small interface: the built-in byte tokenizer, or any Hugging Face tokenizer."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any, Protocol

from trainer.base.errors import InputError
from trainer.base.model.source import BYTE_TOKENIZER
from trainer.data.tokenizer_bytes import ByteTokenizer

CHAT_FLAG = "--dataset-format chat"
Message = dict[str, Any]
"""One turn of a conversation in the OpenAI/Hugging Face chat format: {"role": ..., "content": ...}."""


class Tokenizer(Protocol):
    name: str
    fingerprint: str
    """Identifies the mapping from text to ids (the tokenised data cache is keyed by it)."""
    vocab_size: int
    bos_id: int | None
    eos_id: int | None

    def encode(self, text: str) -> list[int]: ...

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """encode() of each text, in one call (the fast tokenizer's batch encoding)."""
        ...

    def chat_segments(self, messages: list[Message]) -> list[tuple[str, bool]]:
        """A conversation rendered by the tokenizer's chat template, cut into pieces of text, each with whether it is
        trained on (the assistant's turns, chat_pieces); each piece is encoded on its own."""
        ...

    def encode_chat(self, messages: list[Message]) -> tuple[list[int], list[bool]]:
        """A conversation through the tokenizer's chat template: its ids, and per id whether it is trained on (the
        assistant's turns)."""
        ...


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

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """The Rust tokenizer's own batch call, as encode() makes it one text at a time: transformers 5
        tokenization_utils_tokenizers.py TokenizersBackend._encode_plus turns truncation and padding off
        (set_truncation_and_padding with DO_NOT_TRUNCATE / DO_NOT_PAD), sets encode_special_tokens to the
        tokenizer's split_special_tokens, then calls backend encode_batch(add_special_tokens=False) and keeps
        each Encoding's ids. encode_batch_fast gives the same ids without computing character offsets. A tokenizer
        with no Rust backend (a Python or sentencepiece one) is called a text at a time."""
        backend = getattr(self._tokenizer, "backend_tokenizer", None)
        if backend is None:
            return [self.encode(text) for text in texts]
        if backend.truncation is not None:
            backend.no_truncation()
        if backend.padding is not None:
            backend.no_padding()
        split_special = bool(getattr(self._tokenizer, "split_special_tokens", False))
        if backend.encode_special_tokens != split_special:
            backend.encode_special_tokens = split_special
        return [encoding.ids for encoding in backend.encode_batch_fast(texts, add_special_tokens=False)]

    def encode_chat(self, messages: list[Message]) -> tuple[list[int], list[bool]]:
        """The template writes the special tokens itself (the begin-of-text token too), so each piece is encoded
        without adding any."""
        ids: list[int] = []
        trainable: list[bool] = []
        for text, trained in self.chat_segments(messages):
            piece = self.encode(text)
            ids += piece
            trainable += [trained] * len(piece)
        return ids, trainable

    def chat_segments(self, messages: list[Message]) -> list[tuple[str, bool]]:
        if not getattr(self._tokenizer, "chat_template", None):
            raise InputError(
                f"{CHAT_FLAG}: the tokenizer {self.name} has no chat template; give --tokenizer one that has (the "
                "model's -Instruct checkpoint's, for example), or use another --dataset-format"
            )

        def render(turns: list[Message], add_generation_prompt: bool) -> str:
            # transformers tokenization_utils_base.py PreTrainedTokenizerBase.apply_chat_template: tokenize=False
            # returns the rendered text.
            return str(
                self._tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=add_generation_prompt)
            )

        return chat_pieces(messages, render)

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
    template = getattr(tokenizer, "chat_template", None)
    if template:  # it decides the ids of chat records; left out when absent so that older digests stay valid
        parts.append(json.dumps(template, sort_keys=True))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def load_tokenizer(name: str) -> Tokenizer:
    return ByteTokenizer() if name == BYTE_TOKENIZER else HFTokenizer(name)


def check_messages(messages: Any) -> list[Message]:
    """The `messages` of a chat record, as the template expects them: a list of {role, content} objects."""
    if not isinstance(messages, list) or not messages:
        raise InputError(f"{CHAT_FLAG}: a record's 'messages' is not a non-empty list of turns")
    for turn in messages:
        if not isinstance(turn, dict) or not {"role", "content"} <= turn.keys():
            raise InputError(f"{CHAT_FLAG}: a turn of 'messages' is not a {{role, content}} object: {turn!r:.200}")
    return messages


MARKERS = ("\ue000", "\ue001")
"""Private-use characters that stand in for a turn's content when the template renders it again (content_span)."""


def common_prefix(a: str, b: str) -> int:
    size = min(len(a), len(b))
    return next((index for index in range(size) if a[index] != b[index]), size)


def content_span(turns: list[Message], index: int, render: Callable[[list[Message], bool], str]) -> tuple[int, int]:
    """[start, end) of turn `index`'s content in render(turns): the one stretch where the render differs from the
    same conversation with that content replaced by a marker (the rest renders alike). (-1, -1) when the template
    does not show the content there."""
    content = str(turns[index]["content"])
    marker = next(m for m in MARKERS if m not in content)
    full = render(turns, False)
    other = render([*turns[:index], {**turns[index], "content": marker}, *turns[index + 1 :]], False)
    if full == other:
        return -1, -1
    prefix = common_prefix(full, other)
    suffix = common_prefix(full[prefix:][::-1], other[prefix:][::-1])
    return prefix, len(full) - suffix


def chat_pieces(messages: Any, render: Callable[[list[Message], bool], str]) -> list[tuple[str, bool]]:
    """One render of the whole conversation, cut into consecutive pieces of text, each with whether it is trained on.

    Each assistant turn i is trained on from the end of the prompt that asks for it (render(turns before i, with the
    generation prompt), where the whole render starts with it) through its content and the text the template closes
    a turn with (what render(turns up to i) writes after the content); everything else (system, user, tool turns, the
    assistant header) is masked. The turn's content is found in the whole render by content_span, so a template that
    renders a turn differently once more turns follow (Qwen3's keeps the empty reasoning block of the last turn only,
    and drops earlier turns' reasoning) is cut where its one render of the conversation puts each turn. The prompt is
    tokenised on its own, as at inference, where the model continues from the generation prompt's tokens. A template
    that does not show a turn's content in the whole conversation cannot be trained on it: an InputError names the
    turn.
    """
    turns = check_messages(messages)
    full = render(turns, False)
    pieces: list[tuple[str, bool]] = []
    done = 0
    for index, turn in enumerate(turns):
        if turn["role"] != "assistant":
            continue
        start, end = content_span(turns, index, render)
        alone_start, alone_end = content_span(turns[: index + 1], index, render)
        if start < done or alone_start < 0:
            raise InputError(
                f"{CHAT_FLAG}: the tokenizer's chat template does not render turn {index} (assistant) in the whole "
                "conversation where its tokens can be told from the prompt's"
            )
        prompt = render(turns[:index], True)
        if full.startswith(prompt) and done <= len(prompt) <= start:
            start = len(prompt)
        closing = render(turns[: index + 1], False)[alone_end:]  # the end-of-turn text after a last turn's content
        if full.startswith(closing, end):
            end += len(closing)
        pieces += [(full[done:start], False), (full[start:end], True)]
        done = end
    pieces.append((full[done:], False))
    return [(text, trained) for text, trained in pieces if text]
