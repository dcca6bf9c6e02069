"""The project's import graph, read from the code with ast (every import statement, those inside functions too):
which project modules each module imports, and which third-party packages."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from stack.paths import PROJECT_ROOT

# Top-level packages of the project (and __main__.py): imports of anything else are third-party or standard library.
PACKAGES = frozenset(
    {
        "trainer",
        "sizing",
        "stack",
        "infra",
        "policy",
        "workloads",
        "local",
        "tools",
        "ci",
        "bench",
        "preflight",
        "__main__",
    }
)
SKIPPED_DIRS = frozenset({".venv", "venv", ".git", "tests", "__pycache__"})


def module_files() -> dict[str, Path]:
    """Every project module outside tests/, by dotted name (the package's __init__ by the package's name)."""
    modules = {}
    for path in sorted(PROJECT_ROOT.rglob("*.py")):
        relative = path.relative_to(PROJECT_ROOT)
        if SKIPPED_DIRS & set(relative.parts) or any(part.startswith(".") for part in relative.parts):
            continue
        parts = relative.with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


MODULES = module_files()


def imported_names(path: Path) -> Iterator[str]:
    """Every module name an import statement of the file names (relative imports resolved)."""
    package = path.relative_to(PROJECT_ROOT).parent.parts
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            yield module
            # `from package import module` imports the module.
            yield from (f"{module}.{alias.name}" for alias in node.names if f"{module}.{alias.name}" in MODULES)


@cache
def project_imports(module: str) -> frozenset[str]:
    """The project modules `module` imports directly. Importing a.b.c runs a/__init__.py and a/b/__init__.py too, so
    they count, except the packages `module` itself lies in (Python has run them already: no circle)."""
    own_packages = {".".join(module.split(".")[:end]) for end in range(1, module.count(".") + 2)}
    found = set()
    for name in imported_names(MODULES[module]):
        parts = name.split(".")
        for end in range(1, len(parts) + 1):
            prefix = ".".join(parts[:end])
            if prefix in MODULES and prefix not in own_packages:
                found.add(prefix)
    return frozenset(found)


@cache
def third_party(module: str) -> frozenset[str]:
    return frozenset(
        name.split(".")[0] for name in imported_names(MODULES[module]) if name.split(".")[0] not in PACKAGES
    )


def package_of(module: str) -> str:
    return module.split(".")[0]


def reachable(module: str) -> set[str]:
    seen, todo = set(), [module]
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(project_imports(current))
    return seen
