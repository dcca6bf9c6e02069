"""Declarative config sections: a dataclass field per key, with the key's name, description and check.

`stack/config.py` declares the sections; this module turns a raw mapping (as Pulumi or a stack file gives it)
into those dataclasses, collecting every problem instead of stopping at the first, and produces the rows of
the README's config reference and of Pulumi.yaml's declarations from the same declarations. A job.* setting that is a
trainer option is declared by the option itself (trainer/base/flags/config.py, its StackKey): `job_option` reads its
default, text and checks from there, and `trainer_values` gives the trainer's value of every such setting.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from trainer.base.flags.config import TrainConfig
from trainer.base.flags.options import Option, Problem, options

NAMESPACE = "fsdp-eks"

Check = Callable[[Any], str | None]  # returns what is allowed when the value is bad, None when it is fine


class ConfigError(ValueError):
    """Every problem found in a stack's config, one per line, each naming the key, the value and what is allowed."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid stack config:\n  " + "\n  ".join(problems))


def setting(key: str, default: Any, doc: str, check: Check | None = None, *, factory: bool = False) -> Any:
    """A config field: `key` is the camelCase name users write, `doc` goes into the README and Pulumi.yaml."""
    metadata = {"key": key, "doc": doc, "check": check}
    if factory:
        return dataclasses.field(default_factory=lambda: list(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


# The trainer options the stack's job section takes, by their key under job ("allReduceDtype", "lora.rank").
JOB_OPTIONS: dict[str, Option] = {o.stack.key: o for o in options(TrainConfig) if o.stack is not None}


def as_trainer_value(value: Any) -> Any:
    """A setting's value as the trainer option takes it: a list of names comma-separated (job.lora.targets)."""
    return ",".join(value) if isinstance(value, list) else value


def _trainer_check(declared: Option) -> Check:
    def check(value: Any) -> str | None:
        given = as_trainer_value(value)
        failed = [c.allowed for c in declared.checks if given is not None and not c.holds(given)]
        return failed[0] if failed else None

    return check


def _both(first: Check, then: Check) -> Check:
    return lambda value: first(value) or then(value)


def job_option(key: str, check: Check | None = None) -> Any:
    """A job.* setting that is the trainer option with StackKey `key`: its default, its README text and its checks are
    the option's own; `check` is a rule of the stack's own, checked first (job.checkpointEvery: the stack always
    checkpoints)."""
    declared = JOB_OPTIONS[key]
    own = _trainer_check(declared)
    metadata = {
        "key": key.rsplit(".", 1)[-1],
        "doc": declared.stack_doc,
        "check": _both(check, own) if check else own,
        "trainer": declared.path,
    }
    default = declared.stack_default
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def trainer_values(settings: Any) -> dict[str, Any]:
    """The trainer option of every job_option field of `settings` (and of the maps inside it), by path, with its
    value as the trainer takes it (a list of names comma-separated)."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if dataclasses.is_dataclass(value):
            values |= trainer_values(value)
        elif "trainer" in f.metadata:
            values[f.metadata["trainer"]] = as_trainer_value(value)
    return values


def job_key(path: str) -> str:
    """How the stack names a trainer option: job.<key>, or the trainer's flag for one the stack does not take."""
    keys = {o.path: f"job.{key}" for key, o in JOB_OPTIONS.items()}
    return keys.get(path) or next(o.flag for o in options(TrainConfig) if o.path == path)


def stack_problem(problem: Problem) -> str:
    """A trainer rule's problem in the stack's words: the same text, each option named by its job.* key."""
    return f"{NAMESPACE}:{job_key(problem.path)}: {problem.value!r} is not allowed; {problem.text_with(job_key)}"


def one_of(*allowed: str) -> Check:
    return lambda value: None if value in allowed else f"one of {', '.join(allowed)}"


def one_of_ints(*allowed: int) -> Check:
    return lambda value: None if value in allowed else f"one of {', '.join(map(str, allowed))}"


def at_least(low: float) -> Check:
    return lambda value: None if value >= low else f"a number >= {low}"


def between(low: float, high: float) -> Check:
    return lambda value: None if low <= value <= high else f"a number from {low} to {high}"


def _base_type(annotation: Any) -> tuple[type, bool]:
    """(the type a field holds, whether None is allowed) for annotations like `int`, `str | None`, `list[str]`."""
    if isinstance(annotation, str):
        annotation = eval(annotation, {"list": list})  # annotations are postponed strings under __future__
    optional = False
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = len(members) < len(typing.get_args(annotation))
        annotation = members[0]
    return (typing.get_origin(annotation) or annotation), optional


def _coerce(value: Any, wanted: type) -> Any:
    """Values from the CLI arrive as strings; stack files give YAML scalars. Accept both, as Pulumi does."""
    if wanted is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in {"true", "false"}:
            return value.lower() == "true"
        raise TypeError("true or false")
    if wanted is int:
        if isinstance(value, bool):
            raise TypeError("an integer")
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
        raise TypeError("an integer")
    if wanted is float:
        if isinstance(value, bool):
            raise TypeError("a number")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise TypeError("a number") from None
    if wanted is list:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value)
        raise TypeError("a list of strings")
    if isinstance(value, str):
        return value
    raise TypeError("a string")


def decode_object(name: str, value: Any, problems: list[str]) -> Mapping[str, Any]:
    """Object-valued keys reach the program as JSON strings (PULUMI_CONFIG) or as maps (stack files)."""
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            problems.append(f"{NAMESPACE}:{name}: {value!r} is not allowed; expected a map of settings")
            return {}
    if not isinstance(value, Mapping):
        problems.append(f"{NAMESPACE}:{name}: {value!r} is not allowed; expected a map of settings")
        return {}
    return value


def parse_section(cls: type, name: str, raw: Mapping[str, Any], problems: list[str]) -> Any:
    """Build dataclass `cls` from the map `raw` of config section `name`, appending problems rather than raising."""
    fields = {f.metadata["key"]: f for f in dataclasses.fields(cls)}
    for unknown in sorted(set(raw) - set(fields)):
        problems.append(f"{NAMESPACE}:{name}.{unknown}: unknown key; allowed keys are {', '.join(sorted(fields))}")
    values: dict[str, Any] = {}
    hints = typing.get_type_hints(cls)
    for key, field in fields.items():
        if key not in raw or raw[key] is None:
            continue
        wanted, _ = _base_type(hints[field.name])
        where = f"{NAMESPACE}:{name}.{key}"
        if dataclasses.is_dataclass(wanted):  # a map of its own keys inside the section (job.lora)
            values[field.name] = parse_section(
                wanted, f"{name}.{key}", decode_object(f"{name}.{key}", raw[key], problems), problems
            )
            continue
        try:
            value = _coerce(raw[key], wanted)
        except TypeError as expected:
            problems.append(f"{where}: {raw[key]!r} is not allowed; expected {expected}")
            continue
        check = field.metadata["check"]
        allowed = check(value) if check else None
        if allowed:
            problems.append(f"{where}: {value!r} is not allowed; expected {allowed}")
            continue
        values[field.name] = value
    return cls(**values)


@dataclasses.dataclass(frozen=True)
class KeyDoc:
    """One row of the config reference."""

    key: str  # e.g. "gpuNodes.count"
    type_name: str
    default: Any
    doc: str


def section_docs(cls: type, name: str) -> list[KeyDoc]:
    hints = typing.get_type_hints(cls)
    rows = []
    for field in dataclasses.fields(cls):
        wanted, _ = _base_type(hints[field.name])
        if dataclasses.is_dataclass(wanted):
            rows += section_docs(wanted, f"{name}.{field.metadata['key']}")
            continue
        type_name = {bool: "boolean", int: "integer", float: "number", list: "list of strings"}.get(wanted, "string")
        rows.append(KeyDoc(f"{name}.{field.metadata['key']}", type_name, _default(field), field.metadata["doc"]))
    return rows


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    return field.default_factory()  # type: ignore[misc]


def section_defaults(cls: type) -> dict[str, Any]:
    """The section's defaults keyed by the names users write, a nested map for a map inside it: what Pulumi.yaml
    declares for the section."""
    hints = typing.get_type_hints(cls)
    defaults: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        wanted, _ = _base_type(hints[field.name])
        key = field.metadata["key"]
        if dataclasses.is_dataclass(wanted):
            defaults[key] = section_defaults(wanted)
        else:
            defaults[key] = _default(field)
    return defaults
