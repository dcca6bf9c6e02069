"""The fields each model of a controller's rules reads, and the check that an object holds no other.

A model that passes over a field it does not read can admit an object the cluster refuses, or act other than the
controller on one it admits: JobSet's webhook, say, has rules on a network's and a startup policy's fields, and the Job
controller acts on activeDeadlineSeconds, which local/trainjob/jobset_webhook.py and
local/trainjob/pod_failure_policy.py do not read. So each model declares the fields it reads as a tree (Fields) and
refuses, before it judges, an object holding any other field, naming its path: a field the project starts to use must be
modelled first.

Pure and torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class Whole:
    """A value the model reads as a whole, or hands to a check of its own (a pod template: the strict schema)."""


WHOLE = Whole()


@dataclass(frozen=True)
class Only:
    """A value the model handles for these values alone (the local run stops a failed job's running pods: only the
    cleanPodPolicy Running)."""

    values: tuple[Any, ...]


@dataclass(frozen=True)
class EachValue:
    """A map whose keys the model's rules judge themselves (the replica types), each value of these fields."""

    fields: Any


# key -> WHOLE, Only, EachValue, a nested map of the same, or a one-item list [fields] for a list of objects.
Fields = Mapping[str, Any]


class UnmodelledFieldError(ValueError):
    """An object with fields the model does not read: judging it would pass them over."""

    def __init__(self, model: str, paths: list[str]) -> None:
        super().__init__(f"{model} does not model {', '.join(paths)}: model the field before the project uses it")
        self.model, self.paths = model, paths


def unmodelled_fields(value: Any, fields: Any, path: str) -> list[str]:
    """The paths in `value` that `fields` does not name (a value of the wrong type is the schema's to refuse)."""
    if isinstance(fields, Whole):
        return []
    if isinstance(fields, Only):
        return [] if value in fields.values else [f"{path}={value!r}"]
    if isinstance(fields, list):
        items = value if isinstance(value, list) else []
        return [
            found
            for index, item in enumerate(items)
            for found in unmodelled_fields(item, fields[0], f"{path}[{index}]")
        ]
    if not isinstance(value, Mapping):
        return []
    if isinstance(fields, EachValue):
        return [
            found for key, item in value.items() for found in unmodelled_fields(item, fields.fields, f"{path}.{key}")
        ]
    found = []
    for key, item in value.items():
        if key in fields:
            found += unmodelled_fields(item, fields[key], f"{path}.{key}")
        else:
            found.append(f"{path}.{key}")
    return found


def require_modelled(value: Any, fields: Fields, path: str, model: str) -> None:
    """Raise UnmodelledFieldError naming every field of `value` (at `path`) that `fields` does not."""
    found = unmodelled_fields(value, fields, path)
    if found:
        raise UnmodelledFieldError(model, found)
