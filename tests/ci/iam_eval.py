"""A small evaluator of IAM policy documents, enough to ask the CI roles' documents concrete questions: is this
action on this resource, with this request context, allowed?

It follows AWS's evaluation logic for one account's identity policies ("Policy evaluation logic", IAM User Guide):
an explicit Deny wins, otherwise an Allow is needed. Action and NotAction, Resource and NotResource match with the
`*` and `?` wildcards, case-insensitively for actions. Conditions: the String/Arn operators the documents use, all
keys of a block must match (AND), any value of a key may match (OR), and a key missing from the request context
makes a positive operator false and a negated one (StringNotEquals, ArnNotEquals, StringNotLike) true.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

NEGATED = {"StringNotEquals", "StringNotLike", "ArnNotEquals", "ArnNotLike"}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _matches(pattern: str, value: str, *, case_sensitive: bool) -> bool:
    if case_sensitive:
        return fnmatch.fnmatchcase(value, pattern)
    return fnmatch.fnmatchcase(value.lower(), pattern.lower())


def _positive(operator: str, expected: list[str], actual: list[str]) -> bool:
    if operator in ("StringEquals", "ArnEquals"):
        return any(a in expected for a in actual)
    if operator in ("StringLike", "ArnLike"):
        return any(_matches(e, a, case_sensitive=True) for e in expected for a in actual)
    raise ValueError(f"condition operator {operator} is not supported here")


def _operator_matches(operator: str, expected: list[str], actual: list[str]) -> bool:
    if operator in NEGATED:
        return not _positive(operator.replace("Not", ""), expected, actual)
    return _positive(operator, expected, actual)


def _conditions_hold(conditions: Mapping[str, Mapping[str, Any]], context: Mapping[str, Any]) -> bool:
    for operator, keys in conditions.items():
        for key, expected in keys.items():
            if key not in context:
                if operator not in NEGATED:
                    return False
                continue
            if not _operator_matches(operator, _as_list(expected), _as_list(context[key])):
                return False
    return True


def _applies(statement: Mapping[str, Any], action: str, resource: str, context: Mapping[str, Any]) -> bool:
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
    statements = [s for s in policy["Statement"] if _applies(s, action, resource, context or {})]
    if any(s["Effect"] == "Deny" for s in statements):
        return False
    return any(s["Effect"] == "Allow" for s in statements)
