"""docs/data.md's example records: each is read by the trainer as the format its paragraph names."""

from __future__ import annotations

import json
import re

import pytest

from stack.paths import PROJECT_ROOT
from trainer.base.flags.config import DATASET_FORMATS
from trainer.data.formats import detect_format, render

DATA_DOC = (PROJECT_ROOT / "docs" / "data.md").read_text()
# A paragraph that starts with a format's name, then its example block.
EXAMPLE = re.compile(r"^`(\w+)`[^\n]*(?:\n[^\n`][^\n]*)*\n\n```jsonl\n(.*?)\n```", re.MULTILINE | re.DOTALL)


def examples() -> dict[str, list[dict[str, object]]]:
    return {name: [json.loads(line) for line in block.splitlines()] for name, block in EXAMPLE.findall(DATA_DOC)}


def test_the_page_shows_one_example_of_every_format() -> None:
    assert sorted(examples()) == sorted(f for f in DATASET_FORMATS if f != "auto")


@pytest.mark.parametrize("data_format", [f for f in DATASET_FORMATS if f != "auto"])
def test_each_example_is_detected_as_its_format(data_format: str) -> None:
    for record in examples()[data_format]:
        assert detect_format(record) == data_format


@pytest.mark.parametrize("data_format", ["text", "instruction", "dialogsum"])
def test_each_example_renders_a_response_to_train_on(data_format: str) -> None:
    for record in examples()[data_format]:
        _, response = render(record, data_format)
        assert response.strip()
