"""The docs' module tables say what the modules' own docstrings say (tools/module_tables.py writes them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stack.paths import PROJECT_ROOT
from tools import module_tables


def test_every_table_matches_the_modules() -> None:
    assert module_tables.stale_docs() == [], "run python -m tools.module_tables"


@pytest.mark.parametrize(
    "doc,spec",
    [
        ("docs/trainer.md", "trainer"),
        ("docs/architecture.md", "trainer folders"),
        ("docs/architecture.md", "stack"),
        ("docs/job.md", "workloads/job"),
        ("docs/local.md", "local folders"),
        ("docs/local.md", "local/pytorchjob"),
        ("docs/local.md", "local/trainjob"),
    ],
)
def test_the_docs_hold_the_module_tables(doc: str, spec: str) -> None:
    assert f"<!-- module-table: {spec} -->" in (PROJECT_ROOT / doc).read_text()


def hand_written_module_tables(text: str) -> list[str]:
    """The header lines of tables whose first column is "Module" outside the generated tables."""
    outside = module_tables.TABLE.sub("", text)
    return [line for line in outside.splitlines() if line.replace(" ", "").startswith("|Module|")]


@pytest.mark.parametrize("doc", module_tables.docs())
def test_no_module_table_is_written_by_hand(doc: str) -> None:
    assert hand_written_module_tables((PROJECT_ROOT / doc).read_text()) == [], f"{doc}: mark it as a module-table"


def test_a_module_table_written_by_hand_is_found() -> None:
    generated = (PROJECT_ROOT / "docs/job.md").read_text()
    assert hand_written_module_tables(generated) == []
    by_hand = "| Module | What it does |\n| --- | --- |\n| `pod.py` | the pod |\n"
    assert hand_written_module_tables(generated + "\n" + by_hand) == ["| Module | What it does |"]


def test_a_module_missing_from_the_table_is_found(tmp_path: Path) -> None:
    text = (PROJECT_ROOT / "docs/trainer.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `train.py` |"))
    assert module_tables.rendered(text.replace(row + "\n", "")) == text


def test_a_row_that_differs_from_its_docstring_is_rewritten() -> None:
    text = (PROJECT_ROOT / "docs/trainer.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `train.py` |"))
    changed = text.replace(row, "| `train.py` | the loop |")
    assert changed != text and module_tables.rendered(changed) == text


@pytest.mark.parametrize(
    "docstring,sentence",
    [
        ('"""One. Two."""', "One."),
        ('"""Uses e.g. this. Then."""', "Uses e.g. this."),
        ('"""`torchrun ... -m trainer`: see it."""', "`torchrun ... -m trainer`: see it."),
        ('"""Wrapped\n    over lines\n\n    Later."""', "Wrapped over lines"),
    ],
)
def test_first_sentence(tmp_path: Path, docstring: str, sentence: str) -> None:
    module = tmp_path / "m.py"
    module.write_text(docstring + "\n")
    assert module_tables.first_sentence(module) == sentence
