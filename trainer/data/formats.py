"""Record formats: which one a record is in, and its (prompt, response) text; the prompt conditions the model and only
the response is learnt. Chat records (`messages`) are rendered by the tokenizer's template instead
(trainer/data/tokenizer.py chat_pieces)."""

from __future__ import annotations

from typing import Any

from trainer.base.errors import InputError

Record = dict[str, Any]
INSTRUCTION_PROMPT = "### Instruction:\n{instruction}\n\n{input_block}### Response:\n"
DIALOGUE_PROMPT = "Summarize this dialogue:\n{dialogue}\n---\nSummary:\n"


def detect_format(record: Record) -> str:
    if "messages" in record:
        return "chat"
    if {"instruction", "output"} <= record.keys():
        return "instruction"
    if {"dialogue", "summary"} <= record.keys():
        return "dialogsum"
    if "text" in record:
        return "text"
    raise InputError(f"--dataset-format auto: cannot tell the format from the fields {sorted(record)}")


def render(record: Record, data_format: str) -> tuple[str, str]:
    """(prompt, response): the prompt conditions the model, only the response is trained on."""
    try:
        if data_format == "text":
            return "", str(record["text"])
        if data_format == "instruction":
            extra = str(record.get("input") or "")
            input_block = f"### Input:\n{extra}\n\n" if extra else ""
            return INSTRUCTION_PROMPT.format(instruction=record["instruction"], input_block=input_block), str(
                record["output"]
            )
        return DIALOGUE_PROMPT.format(dialogue=record["dialogue"]), str(record["summary"])
    except KeyError as missing:
        raise InputError(f"--dataset-format {data_format}: a record has no field {missing}") from None
