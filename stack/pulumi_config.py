"""Read the stack's config from the Pulumi engine (or its mocks) and validate it before anything is registered."""

from __future__ import annotations

from typing import Any

import pulumi

from stack.config import SECTIONS, StackConfig
from stack.fields import NAMESPACE
from stack.parse import parse_stack_config


def read_stack_config() -> StackConfig:
    """The validated StackConfig of the running stack; raises ConfigError, which fails `pulumi preview`."""
    ours = pulumi.Config(NAMESPACE)
    raw: dict[str, Any] = {"aws:region": pulumi.Config("aws").get("region")}
    for name in SECTIONS:
        value = ours.get(name)  # object values arrive as JSON text; parse_stack_config decodes them
        if value is not None:
            raw[f"{NAMESPACE}:{name}"] = value
    # Keys we do not know are reported too, so a typo such as `gpuNode:` fails instead of being ignored.
    for key in _namespace_keys():
        raw.setdefault(key, ours.get(key.split(":", 1)[1]))
    return parse_stack_config(raw, pulumi.get_stack(), secrets_visible=True)  # secret keys included, as set


def _namespace_keys() -> list[str]:
    from pulumi.runtime.config import CONFIG, get_config_env  # the engine's own view of the stack's keys

    keys = set(CONFIG.get()) | set(get_config_env())
    return sorted(k for k in keys if k.startswith(f"{NAMESPACE}:"))
