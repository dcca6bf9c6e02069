"""Resource properties as the checks see them: plain dicts, lists and scalars, camelCase keys as the engine passes
them, numbers possibly as floats (protobuf Struct has only doubles), and UNKNOWN where `pulumi preview` cannot know
a value yet (an output of a resource still to be created, such as the pushed image's digest)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


class _Unknown:
    """A value only `pulumi up` will know. A mandatory check never guesses it: where what it needs is unknown it
    reports `not_checked`, where the rest of the resource is enough it checks the rest."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<unknown during preview>"


UNKNOWN: Any = _Unknown()


def is_unknown(value: Any) -> bool:
    return value is UNKNOWN


def has_unknown(value: Any) -> bool:
    """Whether the value, or anything inside it, is unknown."""
    return any(is_unknown(v) for _, v in walk(value))


# How a mandatory policy's message starts when it could not make its check. Mandatory policies fail closed: what they
# cannot see (a value unknown during the preview, a property missing, a resource not in the stack) or cannot size is a
# violation that says so, never a pass.
NOT_CHECKED = "not checked"


def not_checked(what: str, remedy: str) -> str:
    """The violation of a check that could not be made: what was unknown, and how to get it checked."""
    return f"{NOT_CHECKED}: {what}; {remedy}"


def get(value: Any, *path: str | int) -> Any:
    """The value at `path` inside nested dicts and lists; None where any step is missing, UNKNOWN where a step is
    unknown."""
    for step in path:
        if is_unknown(value):
            return UNKNOWN
        if isinstance(step, int) and isinstance(value, Sequence) and not isinstance(value, str):
            value = value[step] if -len(value) <= step < len(value) else None
        elif isinstance(value, Mapping):
            value = value.get(step)
        else:
            return None
    return value


def as_int(value: Any) -> int | None:
    """An integer from an int, an integral float (16.0) or a decimal string ("8", as Kubernetes quantities of
    extended resources are written); None for anything else, UNKNOWN included."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def walk(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[tuple[str | int, ...], Any]]:
    """Every (path, value) pair in a nested structure, containers included, depth first."""
    found: list[tuple[tuple[str | int, ...], Any]] = [(path, value)]
    if isinstance(value, Mapping):
        for key, child in value.items():
            found += walk(child, (*path, key))
    elif isinstance(value, Sequence) and not isinstance(value, str):
        for index, child in enumerate(value):
            found += walk(child, (*path, index))
    return found


def dotted(path: Sequence[str | int]) -> str:
    """A path as people read it: spec.containers[0].env[1]."""
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text


@dataclass(frozen=True)
class StackResource:
    """One resource of the stack, for checks that look at several resources together."""

    type: str
    urn: str
    props: Mapping[str, Any]
    parent: str | None = None
    dependencies: tuple[str, ...] = ()  # URNs of every resource this one depends on
    property_dependencies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # input name -> URNs


def policy_document(document: Any) -> Any:
    """An IAM or bucket policy document as pulumi-aws takes it (a JSON string, or an object), parsed: the object; None
    where there is none; UNKNOWN where any of it is unknown during the preview. json.JSONDecodeError (a ValueError)
    for a string that is not JSON."""
    if is_unknown(document) or (not isinstance(document, str | Mapping) and has_unknown(document)):
        return UNKNOWN
    if document is None:
        return None
    parsed = json.loads(document) if isinstance(document, str) else document
    return UNKNOWN if has_unknown(parsed) else parsed
