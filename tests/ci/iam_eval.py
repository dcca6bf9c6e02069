"""A small evaluator of IAM policy documents, enough to ask the CI roles' documents concrete questions: is this
action on this resource, with this request context, allowed?

It follows AWS's evaluation logic for one account's identity policies ("Policy evaluation logic", IAM User Guide):
an explicit Deny wins, otherwise an Allow is needed. Action and NotAction, Resource and NotResource match with the
`*` and `?` wildcards, case-insensitively for actions. Conditions (IAM User Guide, "IAM JSON policy elements: Condition
operators" and "Multivalued context keys"): all operators and keys of a block must match (AND), any value of a key may
match (OR). Operators: the String, Arn, Bool and Numeric families, Null, and the ForAnyValue:/ForAllValues: set
prefixes over multivalued keys. A key missing from the request context makes a positive operator false and a negated
one (StringNotEquals, ArnNotLike, ...) true; ForAllValues: is true over a missing key and ForAnyValue: false; Null is
true for "true" when the key is missing. An operator with the IfExists suffix (any but Null) is true when its key is
missing and is the operator without the suffix when the key is there ("...IfExists condition operators").
"""

from __future__ import annotations

import fnmatch
import operator
from collections.abc import Callable, Mapping
from typing import Any

NEGATED = {"StringNotEquals", "StringNotLike", "ArnNotEquals", "ArnNotLike", "NumericNotEquals"}
NUMERIC: dict[str, Callable[[float, float], bool]] = {
    "NumericEquals": operator.eq,
    "NumericLessThan": operator.lt,
    "NumericLessThanEquals": operator.le,
    "NumericGreaterThan": operator.gt,
    "NumericGreaterThanEquals": operator.ge,
}
SET_PREFIXES = ("ForAnyValue:", "ForAllValues:")
IF_EXISTS = "IfExists"


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _matches(pattern: str, value: str, *, case_sensitive: bool) -> bool:
    if case_sensitive:
        return fnmatch.fnmatchcase(value, pattern)
    return fnmatch.fnmatchcase(value.lower(), pattern.lower())


def _value_matches(operator_name: str, expected: list[Any], actual: Any) -> bool:
    """Whether one context value matches any expected value under a positive operator."""
    if operator_name in ("StringEquals", "ArnEquals"):
        return str(actual) in [str(e) for e in expected]
    if operator_name in ("StringLike", "ArnLike"):
        return any(_matches(str(e), str(actual), case_sensitive=True) for e in expected)
    if operator_name == "Bool":
        return str(actual).lower() in [str(e).lower() for e in expected]
    if operator_name in NUMERIC:
        return any(NUMERIC[operator_name](float(actual), float(e)) for e in expected)
    raise ValueError(f"condition operator {operator_name} is not supported here")


def _positive(operator_name: str) -> str:
    return "NumericEquals" if operator_name == "NumericNotEquals" else operator_name.replace("Not", "")


def _key_holds(operator_name: str, expected: list[Any], context: Mapping[str, Any], key: str) -> bool:
    if operator_name == "Null":
        (wanted,) = expected
        return (key not in context) == (str(wanted).lower() == "true")
    if operator_name == f"Null{IF_EXISTS}":
        raise ValueError("Null takes no IfExists suffix")
    if operator_name.endswith(IF_EXISTS):
        return key not in context or _key_holds(operator_name.removesuffix(IF_EXISTS), expected, context, key)
    prefix = next((p for p in SET_PREFIXES if operator_name.startswith(p)), "")
    base = operator_name.removeprefix(prefix)
    if key not in context:
        return prefix == "ForAllValues:" or (not prefix and base in NEGATED)
    negated = base in NEGATED
    held = [
        _value_matches(_positive(base) if negated else base, expected, v) != negated for v in _as_list(context[key])
    ]
    # ForAllValues: every value of the request holds; otherwise one value holding is enough.
    return all(held) if prefix == "ForAllValues:" else any(held)


def _conditions_hold(conditions: Mapping[str, Mapping[str, Any]], context: Mapping[str, Any]) -> bool:
    return all(
        _key_holds(operator_name, _as_list(expected), context, key)
        for operator_name, keys in conditions.items()
        for key, expected in keys.items()
    )


def applies(statement: Mapping[str, Any], action: str, resource: str, context: Mapping[str, Any]) -> bool:
    """Whether a statement's actions, resources and conditions cover the request; a resource policy's Principal is
    judged apart (tests/ci/iam_request.py)."""
    if "Action" in statement:
        if not any(_matches(p, action, case_sensitive=False) for p in _as_list(statement["Action"])):
            return False
    elif any(_matches(p, action, case_sensitive=False) for p in _as_list(statement["NotAction"])):
        return False
    if "Resource" in statement:
        if not any(_matches(p, resource, case_sensitive=True) for p in _as_list(statement["Resource"])):
            return False
    elif any(_matches(p, resource, case_sensitive=True) for p in _as_list(statement["NotResource"])):
        return False
    return _conditions_hold(statement.get("Condition", {}), context)


def allowed(
    policy: Mapping[str, Any], action: str, resource: str = "*", context: Mapping[str, Any] | None = None
) -> bool:
    statements = [s for s in policy["Statement"] if applies(s, action, resource, context or {})]
    if any(s["Effect"] == "Deny" for s in statements):
        return False
    return any(s["Effect"] == "Allow" for s in statements)
