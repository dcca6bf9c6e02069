"""Check a registered resource's inputs, as the engine receives them, against the pinned SDK's own input types.

The mock sees inputs in their wire form: property names as the SDK's getters name them (camelCase), numbers as
floats, secrets wrapped, resources passed as inputs reduced to their id or URN (the harness runs without
resource references). Every property name must be one the `*Args` type declares, at every depth, and every value
must fit the declared type: a misspelt nested key or a string where the SDK wants a list fails, naming the
resource and the path.

What is not checked, and why: values the SDK types as Any or Mapping[str, Any] (a Helm chart's values, a
custom resource's spec: their schemas are not the SDK's; the Kubernetes schema tests cover the objects), and
unknown values (a preview's not-yet-known outputs).
"""

from __future__ import annotations

import collections.abc
import enum
import inspect
import json
import re
import typing
from typing import Any

from pulumi import Output
from pulumi.runtime import rpc

from tests.harness.sdk_classes import args_class, input_annotations, resource_class, wire_names

UNKNOWN_MARKER = "$unknown"
KUBERNETES_OBJECT_META = "pulumi_kubernetes.meta.v1.ObjectMetaArgs"
_SDK_SET_INPUT = re.compile(r'__props__\.__dict__\["(\w+)"\] = \'[^\']*\'')


def check_resource_inputs(type_token: str, inputs: dict[str, Any]) -> list[str]:
    """Problems with one registered resource's inputs, each as "path: what is wrong"; [] when they fit."""
    cls = args_class(type_token)
    if cls is None:
        return _check_custom_object(type_token, inputs)
    provider = type_token.startswith("pulumi:providers:")
    allowed_extra = _sdk_set_inputs(type_token)
    return _check_object(inputs, cls, "", provider, allowed_extra)


def _check_custom_object(type_token: str, inputs: dict[str, Any]) -> list[str]:
    """A Kubernetes custom resource (apiextensions.CustomResource): apiVersion, kind and metadata are typed."""
    if not type_token.startswith("kubernetes:") or resource_class(type_token) is not None:
        return []  # the program's own components take no inputs
    import pulumi_kubernetes

    problems = [f"{key}: expected a string" for key in ("apiVersion", "kind") if not isinstance(inputs.get(key), str)]
    if "metadata" in inputs:
        problems += _check(inputs["metadata"], pulumi_kubernetes.meta.v1.ObjectMetaArgs, "metadata", False)
    return problems


def _sdk_set_inputs(type_token: str) -> set[str]:
    """Inputs the SDK class sets to a constant itself (a Helm Release's `compat`), in wire form."""
    cls = resource_class(type_token)
    init = getattr(cls, "_internal_init", None)
    if init is None:
        return set()
    return {_camel(name) for name in _SDK_SET_INPUT.findall(inspect.getsource(init))}


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part.title() for part in rest)


def _check_object(
    value: Any, cls: type, path: str, provider: bool, extra: collections.abc.Set[str] = frozenset()
) -> list[str]:
    if provider and isinstance(value, str):
        value = _json_or_none(value)
    if not isinstance(value, dict):
        return [f"{path or '(inputs)'}: expected an object of {cls.__name__}, got {_shown(value)}"]
    names, annotations = wire_names(cls), input_annotations(cls)
    problems: list[str] = []
    for key, item in value.items():
        where = f"{path}.{key}" if path else key
        if key not in names:
            if key not in extra:
                close = [n for n in names if n.lower() == key.lower()]
                hint = f"; did you mean {close[0]}?" if close else f"; {cls.__name__} has {', '.join(sorted(names))}"
                problems.append(f"{where}: not an input of {cls.__name__}{hint}")
            continue
        problems += _check(item, annotations.get(key, Any), where, provider)
    return problems


def _check(value: Any, annotation: Any, path: str, provider: bool) -> list[str]:
    value = _unwrap_secret(value)
    if value is None or value == UNKNOWN_MARKER or annotation is Any:
        return []
    members = _members(annotation)
    if len(members) > 1:
        results = [_check(value, member, path, provider) for member in members]
        if any(not r for r in results):
            return []
        return min(results, key=len)
    (annotation,) = members
    origin = typing.get_origin(annotation)
    if origin in (collections.abc.Sequence, list, typing.Sequence):
        if provider and isinstance(value, str):
            value = _json_or_none(value)
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {_shown(value)}"]
        (item,) = typing.get_args(annotation) or (Any,)
        return [p for index, v in enumerate(value) for p in _check(v, item, f"{path}[{index}]", provider)]
    if origin in (collections.abc.Mapping, dict, typing.Mapping):
        if provider and isinstance(value, str):
            value = _json_or_none(value)
        if not isinstance(value, dict):
            return [f"{path}: expected a map, got {_shown(value)}"]
        args = typing.get_args(annotation)
        item = args[1] if len(args) == 2 else Any
        return [p for key, v in value.items() for p in _check(v, item, f"{path}.{key}", provider)]
    if isinstance(annotation, type):
        return _check_scalar_or_type(value, annotation, path, provider)
    return []


def _check_scalar_or_type(value: Any, annotation: type, path: str, provider: bool) -> list[str]:
    from pulumi import Resource, _types

    if _types.is_input_type(annotation):
        return _check_object(value, annotation, path, provider)
    if issubclass(annotation, Resource):
        # Without resource references a resource input travels as its id (custom) or URN (component).
        return [] if isinstance(value, str) else [f"{path}: expected a {annotation.__name__} reference"]
    if issubclass(annotation, enum.Enum):
        allowed = [m.value for m in annotation]
        return [] if value in allowed else [f"{path}: {value!r} is not one of {allowed}"]
    if provider and isinstance(value, str) and annotation is not str:
        value = _json_or_none(value)
    if annotation is bool:
        return [] if isinstance(value, bool) else [f"{path}: expected a boolean, got {_shown(value)}"]
    if annotation is int:
        whole = isinstance(value, int | float) and not isinstance(value, bool) and float(value).is_integer()
        return [] if whole else [f"{path}: expected an integer, got {_shown(value)}"]
    if annotation is float:
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return [] if number else [f"{path}: expected a number, got {_shown(value)}"]
    if annotation is str:
        return [] if isinstance(value, str) else [f"{path}: expected a string, got {_shown(value)}"]
    return []  # assets, archives and other SDK plumbing types


def _members(annotation: Any) -> list[Any]:
    """The alternatives a value may take: Input[T] and Optional wrappers dropped (Awaitable[..] and Output[..]
    are how a program passes a value, not what reaches the engine)."""
    if typing.get_origin(annotation) is typing.Union:
        kept = []
        for member in typing.get_args(annotation):
            origin = typing.get_origin(member)
            if member is type(None) or origin in (collections.abc.Awaitable, typing.Awaitable) or origin is Output:
                continue
            kept += _members(member)
        return kept or [Any]
    return [annotation]


def _unwrap_secret(value: Any) -> Any:
    if isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig:
        return value.get("value")
    return value


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
