"""docs/sizing.md's hand-calculated figures for Llama 2 7B, 13B and 70B are what `python -m sizing` prints."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sizing.cli import main
from stack.paths import PROJECT_ROOT
from trainer.base.units import GIB

DOC = PROJECT_ROOT / "docs" / "sizing.md"
# Column of the doc's sizing table -> where the --json output has it (bytes).
MEMORY_COLUMNS = {
    "parameters": ("memory_bytes", "parameters"),
    "Adam m+v": ("memory_bytes", "optimizer_states"),
    "gradients": ("memory_bytes", "gradients"),
    "gathered": ("memory_bytes", "unsharded_parameters"),
    "full gradients": ("memory_bytes", "unsharded_gradients"),
    "communication": ("memory_bytes", "communication_buffers"),
    "activations": ("memory_bytes", "activations"),
    "loss": ("memory_bytes", "loss_buffers"),
    "peak allocated": ("peak_allocated_bytes",),
    "needed": ("needed_bytes",),
}


def doc_table(marker: str) -> list[dict[str, str]]:
    """The markdown table right after `<!-- marker -->` in docs/sizing.md, as one dict per row."""
    lines = DOC.read_text().split(f"<!-- {marker} -->", 1)[1].strip().splitlines()
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    header, body = rows[0], rows[2:]
    return [dict(zip(header, row, strict=True)) for row in body]


def printed(capsys: pytest.CaptureFixture[str], row: dict[str, str]) -> dict:
    assert main(["--model", row["model"], *row["arguments"].split(), "--json"]) == 0
    [result] = json.loads(capsys.readouterr().out)
    return result


@pytest.mark.parametrize("row", doc_table("sizing-check"), ids=lambda row: row["model"])
def test_hand_calculated_memory_matches_the_printed_figures(capsys: pytest.CaptureFixture[str], row: dict) -> None:
    result = printed(capsys, row)
    assert result["peak_moment"] == row["peak at"]
    for column, path in MEMORY_COLUMNS.items():
        value: Any = result
        for key in path:
            value = value[key]
        assert value / GIB == pytest.approx(float(row[column]), abs=0.0006), column


@pytest.mark.parametrize("row", doc_table("throughput-check"), ids=lambda row: row["arguments"])
def test_hand_calculated_throughput_matches_the_printed_figures(capsys: pytest.CaptureFixture[str], row: dict) -> None:
    result = printed(capsys, row)
    assert result["tokens_per_second"] == pytest.approx(float(row["tokens/s"].replace(",", "")), abs=1)
    assert 100 * result["mfu"] == pytest.approx(float(row["MFU"].rstrip("%")), abs=0.05)
    assert 100 * result["scaling_efficiency"] == pytest.approx(float(row["scaling efficiency"].rstrip("%")), abs=0.05)


def test_the_docs_cover_llama_2_7b_13b_and_70b() -> None:
    assert {row["model"] for row in doc_table("sizing-check")} == {"llama2-7b", "llama2-13b", "llama2-70b"}
