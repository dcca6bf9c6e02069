"""A stack's config read from its Pulumi.<stack>.yaml as the engine would pass it, for code that runs without the
engine. That is the render CLI, the local run, the reviewer's summary and the tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from stack.config import StackConfig
from stack.parse import parse_stack_config
from stack.paths import PROJECT_ROOT


def stack_names(root: Path = PROJECT_ROOT) -> list[str]:
    """Every stack with a Pulumi.<stack>.yaml in the project, sorted."""
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in root.glob("Pulumi.*.yaml"))


def stack_file(stack: str, root: Path = PROJECT_ROOT) -> Path:
    path = root / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        known = ", ".join(stack_names(root)) or "none"
        raise FileNotFoundError(f"no stack named {stack!r}: {path.name} does not exist; stacks here: {known}")
    return path


def raw_stack_config(stack: str, root: Path = PROJECT_ROOT) -> dict[str, Any]:
    """The stack file's `config:` map with secure (encrypted) values left out: they never leave Pulumi."""
    document = yaml.safe_load(stack_file(stack, root).read_text()) or {}
    config = document.get("config") or {}
    return {key: value for key, value in config.items() if not (isinstance(value, dict) and "secure" in value)}


def load_stack_config(stack: str, root: Path = PROJECT_ROOT) -> StackConfig:
    return parse_stack_config(raw_stack_config(stack, root), stack)
