"""How a trainer option is declared, once: its flag, type, default, `--help` text, checks, and where the stack and
the sizing take it.

Torch-free. config.py beside it declares every option with `option(...)` as a dataclass field; the docstring under the
field is its `--help` text. From that one declaration come the trainer's parser and `to_argv`, the stack's job.*
settings (stack/fields.py `job_option`, by `stack=StackKey(...)`), the sizing's flags (`sizing=True`), and the
problems below: each names the option by its path ("parallel.sharding_strategy"), and each reader names that path
its own way (the trainer by its flag, the stack by its config key), so the trainer and the preview say the same thing
from one rule.

An option's rules across options are declared with it too: `only_with=OnlyWith(...)`, and `rules=` with `Requires`,
`Excludes`, `Across` (any other), `WithModel` and `WithWorld` (those that need the model's shape or the world size,
which the reader passes in `Facts`). They are pure: each reads the config and the facts and returns what is wrong.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import itertools
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from trainer.base.model.presets import ModelShape


@dataclass(frozen=True)
class Check:
    """One rule on one option's value: whether it holds, what is wrong in the trainer's words (`reason`, after
    "--flag value: ") and what is allowed in the stack's (`allowed`, after "expected ")."""

    holds: Callable[[Any], bool]
    reason: str
    allowed: str
    detail: Callable[[Any], str] | None = None
    """What in the value is wrong, said before the reason (the unknown names in a list)."""

    def says(self, value: Any) -> str:
        """The trainer's words for `value`, which breaks this check."""
        return f"{self.detail(value)}; {self.reason}" if self.detail else self.reason


def positive(*, integer: bool = True) -> Check:
    return Check(lambda value: value > 0, "must be positive", "a number >= 1" if integer else "a number > 0")


def non_negative(note: str = "") -> Check:
    return Check(lambda value: value >= 0, "must not be negative" + note, "a number >= 0")


def non_empty(none: str) -> Check:
    """For a name whose absence is None: an empty one would count as given to the rules across options, while the
    code that reads it (`if name:`) would take it as none, and a flag that needs it would then do nothing."""
    return Check(lambda value: bool(value.strip()), f"must not be empty; {none}", "a non-empty name")


def one_of(choices: Iterable[str]) -> Check:
    allowed = tuple(choices)
    listed = ", ".join(allowed)
    return Check(lambda value: value in allowed, f"must be one of {listed}", f"one of {listed}")


@dataclass(frozen=True)
class Facts:
    """What some rules need from outside the options, where the reader knows it: the model's shape and the world size
    (ranks). None: not known there, and the rules that need it are not checked."""

    shape: ModelShape | None = None
    world_size: int | None = None


class Rule(Protocol):
    """A rule across options, declared with the option it refuses: what is wrong with that option's value in
    `config`, in the words Problem.text takes, or None when the rule holds."""

    def text(self, option: Option, config: Any, facts: Facts) -> str | None: ...


def is_set(config: Any, path: str) -> bool:
    """Whether the option at `path` has left its default."""
    return value_at(config, path) != by_path(type(config))[path].default


@dataclass(frozen=True)
class OnlyWith:
    """The option may leave its default only while another option (by path) has one value."""

    path: str
    value: Any

    def text(self, option: Option, config: Any, facts: Facts) -> str | None:
        other = value_at(config, self.path)
        if not is_set(config, option.path) or other == self.value:
            return None
        return f"only with {{{self.path}}} {self.value} (not {other})"


@dataclass(frozen=True)
class Requires:
    """The option, set away from its default, needs one of the options at `paths` set away from theirs. `what` names
    what it needs ("a held-out set: {validation.split} (such as 0.02) or {validation.dataset}")."""

    paths: tuple[str, ...]
    what: str

    def text(self, option: Option, config: Any, facts: Facts) -> str | None:
        if not is_set(config, option.path) or any(is_set(config, path) for path in self.paths):
            return None
        return f"needs {self.what}"


@dataclass(frozen=True)
class Excludes:
    """The option, set away from its default, is refused while the option at `path` is set away from its too.
    `instead` says what to do."""

    path: str
    instead: str

    def text(self, option: Option, config: Any, facts: Facts) -> str | None:
        if not is_set(config, option.path) or not is_set(config, self.path):
            return None
        return f"not with {{{self.path}}} {value_at(config, self.path)}; {self.instead}"


@dataclass(frozen=True)
class Across:
    """Any other rule across options: `problem(config)`."""

    problem: Callable[[Any], str | None]

    def text(self, option: Option, config: Any, facts: Facts) -> str | None:
        return self.problem(config)


@dataclass(frozen=True)
class WithModel:
    """A rule that needs the model's shape: `problem(config, shape)`, checked where the shape is known."""

    problem: Callable[[Any, ModelShape], str | None]

    def text(self, option: Option, config: Any, facts: Facts) -> str | None:
        return None if facts.shape is None else self.problem(config, facts.shape)


@dataclass(frozen=True)
class WithWorld:
    """A rule that needs the world size (ranks): `problem(config, world_size)`, checked where it is known."""

    problem: Callable[[Any, int], str | None]

    def text(self, option: Option, config: Any, facts: Facts) -> str | None:
        return None if facts.world_size is None else self.problem(config, facts.world_size)


class _Same:
    def __repr__(self) -> str:
        return "the trainer's"


SAME: Any = _Same()


@dataclass(frozen=True)
class StackKey:
    """Where the stack's job section takes the option: its key under `job` ("allReduceDtype", "lora.rank"), its
    default where the stack's differs from the trainer's, and its README text where that differs from `--help`."""

    key: str
    default: Any = SAME
    doc: str | None = None


def option(
    default: Any = None,
    flag: str = "",
    *,
    choices: tuple[str, ...] | None = None,
    action: str | None = None,
    checks: tuple[Check, ...] = (),
    only_with: OnlyWith | None = None,
    rules: tuple[Rule, ...] = (),
    stack: StackKey | None = None,
    sizing: bool = False,
) -> Any:
    """A trainer option: a dataclass field whose metadata holds everything else its readers need. `checks`: rules on
    its value alone; `only_with` and `rules`: rules across options, checked once its own checks pass. `sizing`: the
    sizing model reads it (sizing/estimate.py make_job), so `python -m sizing` takes its flag too."""
    metadata = {
        "flag": flag,
        "choices": choices,
        "action": action,
        "checks": ((one_of(choices),) if choices else ()) + checks,
        "only_with": only_with,
        "rules": ((only_with,) if only_with else ()) + rules,
        "stack": stack,
        "sizing": sizing,
    }
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Option:
    """One declared option, read back: its path in the config tree and its declaration."""

    section: str
    name: str
    declared: dataclasses.Field[Any]
    doc: str
    value_type: type

    @property
    def path(self) -> str:
        return f"{self.section}.{self.name}"

    @property
    def flag(self) -> str:
        return self.declared.metadata["flag"]

    @property
    def default(self) -> Any:
        return self.declared.default

    @property
    def choices(self) -> tuple[str, ...] | None:
        return self.declared.metadata["choices"]

    @property
    def is_switch(self) -> bool:
        return self.declared.metadata["action"] == "store_true"

    @property
    def checks(self) -> tuple[Check, ...]:
        return self.declared.metadata["checks"]

    @property
    def only_with(self) -> OnlyWith | None:
        return self.declared.metadata["only_with"]

    @property
    def rules(self) -> tuple[Rule, ...]:
        """Its rules across options, OnlyWith first."""
        return self.declared.metadata["rules"]

    @property
    def stack(self) -> StackKey | None:
        return self.declared.metadata["stack"]

    @property
    def sizing(self) -> bool:
        return self.declared.metadata["sizing"]

    @property
    def stack_default(self) -> Any:
        stack = self.stack
        return self.default if stack is None or stack.default is SAME else stack.default

    @property
    def stack_doc(self) -> str:
        stack = self.stack
        return self.doc if stack is None or stack.doc is None else stack.doc


def field_docstrings(cls: type) -> dict[str, str]:
    """The docstring written under each field of a dataclass (Python keeps these only in the source)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for statement, following in itertools.pairwise(body):
        is_doc = isinstance(following, ast.Expr) and isinstance(getattr(following, "value", None), ast.Constant)
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and is_doc:
            docs[statement.target.id] = " ".join(str(following.value.value).split())  # type: ignore[attr-defined]
    return docs


def _value_type(annotation: str) -> type:
    for name, kind in (("bool", bool), ("int", int), ("float", float)):
        if annotation.startswith(name):
            return kind
    return str


def sections(root: type) -> list[tuple[str, type]]:
    """(name, dataclass) of each section of the config tree `root` (TrainConfig)."""
    namespace = vars(inspect.getmodule(root))
    return [(f.name, f.type if isinstance(f.type, type) else namespace[f.type]) for f in dataclasses.fields(root)]


@functools.cache
def options(root: type) -> tuple[Option, ...]:
    """Every option of the config tree `root`, in declaration order."""
    found: list[Option] = []
    for section, cls in sections(root):
        docs = field_docstrings(cls)
        for f in dataclasses.fields(cls):
            found.append(Option(section, f.name, f, docs[f.name], _value_type(str(f.type))))
    return tuple(found)


@functools.cache
def by_path(root: type) -> Mapping[str, Option]:
    """Every option of `root` by its path; built once, as every rule across options looks defaults up in it."""
    return MappingProxyType({o.path: o for o in options(root)})


def value_at(config: Any, path: str) -> Any:
    section, name = path.split(".")
    return getattr(getattr(config, section), name)


def with_values(config: Any, values: Mapping[str, Any]) -> Any:
    """`config` with the options at these paths set (a new tree; `config` is left as it is)."""
    changed: dict[str, dict[str, Any]] = {}
    for path, value in values.items():
        section, name = path.split(".")
        changed.setdefault(section, {})[name] = value
    sections_changed = {s: dataclasses.replace(getattr(config, s), **v) for s, v in changed.items()}
    return dataclasses.replace(config, **sections_changed)


def without_stray_options(config: Any) -> Any:
    """`config` with every option whose OnlyWith no longer holds back at its default: what a change of the option it
    depends on (a sharding strategy other than HYBRID_SHARD) leaves of the rest."""
    stray = {
        o.path: o.default
        for o in options(type(config))
        if o.only_with is not None and value_at(config, o.only_with.path) != o.only_with.value
    }
    return with_values(config, stray)


@dataclass(frozen=True)
class Problem:
    """Why an option's value is refused: `text` says what is wrong; "{section.name}" in it names another option, which
    each reader writes its own way."""

    path: str
    value: Any
    text: str

    def text_with(self, name: Callable[[str], str]) -> str:
        """The text with every other option it names written by `name`."""
        return re.sub(r"\{([a-z_]+\.[a-z_]+)\}", lambda m: name(m.group(1)), self.text)

    def render(self, name: Callable[[str], str]) -> str:
        """The problem as the trainer says it ("--flag value: text", a switch without its value) with `name` =
        flag_of(TrainConfig)."""
        if self.value is True:
            shown = ""
        elif isinstance(self.value, str) and (not self.value or self.value.strip() != self.value):
            shown = f" {self.value!r}"  # an empty name, or one padded with blanks, seen as such
        else:
            shown = f" {self.value}"
        return f"{name(self.path)}{shown}: {self.text_with(name)}"


def value_problems(option_: Option, value: Any) -> list[Problem]:
    """The option's own checks on `value` (None, an option left unset, has nothing to check)."""
    if value is None:
        return []
    return [Problem(option_.path, value, check.says(value)) for check in option_.checks if not check.holds(value)]


def option_problems(config: Any, paths: Iterable[str] | None = None, facts: Facts | None = None) -> list[Problem]:
    """Every declared rule `config` breaks: each option's own checks, then, for the options that pass them, the rules
    across options (those that need `facts` where they are given). `paths`: only these options (the others' values
    are still read)."""
    wanted = None if paths is None else set(paths)
    chosen = [o for o in options(type(config)) if wanted is None or o.path in wanted]
    own = {o.path: value_problems(o, value_at(config, o.path)) for o in chosen}
    passed = [o for o in chosen if not own[o.path]]
    return [p for found in own.values() for p in found] + rule_problems(config, facts, passed)


def rule_problems(config: Any, facts: Facts | None = None, chosen: Iterable[Option] | None = None) -> list[Problem]:
    """The rules across options that `config` breaks (OnlyWith, Requires, Excludes, Across, and with `facts` WithModel
    and WithWorld), each a problem of the option it is declared with."""
    given = facts or Facts()
    problems = []
    for o in options(type(config)) if chosen is None else chosen:
        value = value_at(config, o.path)
        problems += [Problem(o.path, value, text) for rule in o.rules if (text := rule.text(o, config, given))]
    return problems


def flag_of(root: type) -> Callable[[str], str]:
    """How the trainer names an option: by its flag."""
    flags = {o.path: o.flag for o in options(root)}
    return lambda path: flags[path]


def add_arguments(
    parser: argparse.ArgumentParser, chosen: Iterable[Option], defaults: Mapping[str, Any] | None = None
) -> None:
    """One flag per option, in groups by section, each with its `--help` text and default (`defaults` by path where the
    caller's differs); argparse keeps the value under the option's path."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for o in chosen:
        group = groups.get(o.section) or groups.setdefault(o.section, parser.add_argument_group(o.section))
        default = (defaults or {}).get(o.path, o.default)
        kwargs: dict[str, Any] = {"dest": o.path, "default": default}
        if o.is_switch:
            kwargs["action"] = "store_true"
        else:
            kwargs["type"] = o.value_type
            if o.choices:
                kwargs["choices"] = o.choices
            else:
                kwargs["metavar"] = o.flag.lstrip("-").replace("-", "_").upper()
        help_text = o.doc + ("" if default in (None, False) else f" (default: {default})")
        group.add_argument(o.flag, help=help_text, **kwargs)


def from_namespace(root: type, namespace: argparse.Namespace) -> Any:
    """The config tree `root` from parsed flags: options without a flag in `namespace` keep their defaults."""
    given = vars(namespace)
    return with_values(root(), {o.path: given[o.path] for o in options(root) if o.path in given})


def to_argv(config: Any) -> list[str]:
    """The command line that parses back into `config` (flags at their defaults are left out)."""
    argv: list[str] = []
    for o in options(type(config)):
        value = value_at(config, o.path)
        if value == o.default:
            continue
        argv += [o.flag] if o.is_switch else [o.flag, str(value)]
    return argv
