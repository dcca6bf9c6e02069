"""The docs' module tables, written from the modules' own docstrings: each row names a module (or a role folder, by its
`__init__.py`) and the first sentence of its docstring, so a module missing from a table, or a row that says
something else than its module, shows.

    python -m tools.module_tables            # rewrites every table in place
    python -m tools.module_tables --check    # exits 1, naming each table that differs (tests/test_module_tables.py)

A table sits between `<!-- module-table: FOLDER -->` and `<!-- /module-table -->` in a Markdown file of docs/: every
module under FOLDER, or with `FOLDER folders`, FOLDER's folders and its top-level modules, one row each. Every table
in docs/ whose first column is "Module" is one of these (tests/test_module_tables.py).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

from stack.paths import PROJECT_ROOT

TABLE = re.compile(r"(<!-- module-table: (?P<spec>[^>]+?) -->\n)(?P<body>.*?)(<!-- /module-table -->)", re.DOTALL)
DOCS_FOLDER = "docs"
# A sentence ends at a full stop followed by a space or the paragraph's end; "e.g.", "i.e." and "..." do not end one.
SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\.\.)\.(\s|$)")


def first_sentence(path: Path) -> str:
    """The first sentence of the module's docstring, on one line; "" where it has none."""
    docstring = ast.get_docstring(ast.parse(path.read_text(), str(path))) or ""
    paragraph = " ".join(docstring.split("\n\n")[0].split())
    end = SENTENCE_END.search(paragraph)
    return paragraph[: end.start() + 1] if end else paragraph


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def module_rows(folder: Path) -> list[tuple[str, Path]]:
    """Every module under `folder`, by its path relative to it: a package by its folder, read from its __init__.py."""
    rows = []
    for path in sorted(folder.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        relative = path.relative_to(folder)
        name = f"{relative.parent.as_posix()}/" if path.name == "__init__.py" else relative.as_posix()
        if name != "./":
            rows.append((name, path))
    return rows


def folder_rows(folder: Path) -> list[tuple[str, Path]]:
    """The role folders of `folder` (by their __init__.py) and its top-level modules."""
    folders = [(f"{p.parent.name}/", p) for p in sorted(folder.glob("*/__init__.py"))]
    modules = [(p.name, p) for p in sorted(folder.glob("*.py")) if p.name != "__init__.py"]
    return folders + modules


def table(spec: str) -> str:
    """The table's Markdown for `spec`: `FOLDER` (every module) or `FOLDER folders`."""
    folder, *mode = spec.split()
    rows = folder_rows(PROJECT_ROOT / folder) if mode == ["folders"] else module_rows(PROJECT_ROOT / folder)
    lines = ["| Module | What it is |", "| --- | --- |"]
    lines += [f"| `{name}` | {cell(first_sentence(path))} |" for name, path in rows]
    return "\n".join(lines) + "\n"


def rendered(text: str) -> str:
    """`text` with each of its tables written afresh."""
    return TABLE.sub(lambda m: m.group(1) + table(m.group("spec")) + m.group(4), text)


def docs() -> list[str]:
    """The Markdown files of docs/, relative to the project."""
    return [path.relative_to(PROJECT_ROOT).as_posix() for path in sorted((PROJECT_ROOT / DOCS_FOLDER).glob("*.md"))]


def stale_docs() -> list[str]:
    return [doc for doc in docs() if rendered((PROJECT_ROOT / doc).read_text()) != (PROJECT_ROOT / doc).read_text()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.module_tables",
        description="The docs' module tables, written from the modules' docstrings.",
    )
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table differs")
    args = parser.parse_args(argv)
    stale = stale_docs()
    if args.check:
        for doc in stale:
            print(f"{doc}: a module table differs from the modules; run python -m tools.module_tables", file=sys.stderr)
        return 1 if stale else 0
    for doc in stale:
        path = PROJECT_ROOT / doc
        path.write_text(rendered(path.read_text()))
        print(f"wrote {doc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
