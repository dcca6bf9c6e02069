"""No bucket policy of the stack allows a principal outside the stack's account.

Why mandatory, beside s3-bucket-private-and-encrypted: that policy refuses grants to everyone, and S3's public access
block makes any such grant inert anyway. A grant to one other account is not "public" (Amazon S3 user guide, "The
meaning of 'public'": a policy is non-public when it grants only to fixed principals or accounts), so no access block
stops it: an Allow to arn:aws:iam::<another account>:root in the artifacts bucket's policy hands that account the
checkpoints, the model and the data set trained on.

What a statement with Effect Allow may name (its Principal, IAM user guide, "AWS JSON policy elements: Principal"):
- AWS principals (an account id, or an IAM or STS ARN, whose fifth field is the account) of the stack's accounts;
- "*" only with a condition that pins the caller to the stack's accounts (aws:PrincipalAccount or aws:SourceAccount
  with those values, or aws:PrincipalArn with ARNs in them, under a StringEquals or ArnEquals operator);
- an AWS service only pinned the same way (aws:SourceAccount), since a service acts for whichever account asks it;
- nothing else: NotPrincipal (every principal but the ones named), Federated and CanonicalUser principals, whose
  account a policy does not say.
The stack's accounts are the pack's config (accountIds, as for role-trust-within-account, policy/role_trust.py says
why); while none is configured, a statement that names or pins an account is "not checked".

When the document is judged: it is often built from the bucket's ARN (the stack's own TLS-only policy is), which a
first preview does not know; such a document passes the preview and is judged at `pulumi up`, when it is known, for
the pack's rules run immediately before a resource is created or updated and the first violation halts the
deployment (pulumi/pulumi-policy README). A resource policy, so that this happens before the BucketPolicy exists.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from policy.props import get, is_unknown, not_checked, policy_document
from policy.role_trust import CONFIG_SCHEMA as TRUST_CONFIG_SCHEMA

BUCKET = "aws:s3/bucket:Bucket"
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
CONFIG_SCHEMA: dict[str, Any] = {
    "accountIds": {
        **TRUST_CONFIG_SCHEMA["accountIds"],
        "description": "The AWS account(s) the stack deploys to: a bucket policy may allow principals of these alone.",
    },
}
ACCOUNT_ID = re.compile(r"^\d{12}$")
# arn:<partition>:iam::<account>:<user|role|root|...> and arn:<partition>:sts::<account>:assumed-role/...
PRINCIPAL_ARN = re.compile(r"^arn:aws(?:-cn|-us-gov)?:(?:iam|sts)::(?P<account>\d{12}):")
ACCOUNT_CONDITION_KEYS = frozenset({"aws:principalaccount", "aws:sourceaccount"})
ARN_CONDITION_KEYS = frozenset({"aws:principalarn"})
# Operators that match exactly the values given: a wildcard or a negation would let other callers through.
EXACT_OPERATORS = frozenset({"stringequals", "arnequals"})


def _items(value: Any) -> list[Any]:
    if isinstance(value, list | tuple):
        return list(value)
    return [] if value is None else [value]


def account_of(principal: str) -> str | None:
    """The account an AWS principal names: an account id, or an IAM or STS ARN's; None when it names none."""
    if ACCOUNT_ID.match(principal):
        return principal
    found = PRINCIPAL_ARN.match(principal)
    return found["account"] if found else None


def pinned_accounts(condition: Any) -> set[str] | None:
    """The accounts a statement's condition pins the caller to (an exact operator on an account or principal-ARN key,
    every value naming an account); None when it pins none."""
    if not isinstance(condition, Mapping):
        return None
    pinned: set[str] | None = None
    for operator, clauses in condition.items():
        if str(operator).lower() not in EXACT_OPERATORS or not isinstance(clauses, Mapping):
            continue
        for key, values in clauses.items():
            lowered = str(key).lower()
            if lowered in ACCOUNT_CONDITION_KEYS:
                named = [v if isinstance(v, str) and ACCOUNT_ID.match(v) else None for v in _items(values)]
            elif lowered in ARN_CONDITION_KEYS:
                named = [account_of(v) if isinstance(v, str) else None for v in _items(values)]
            else:
                continue
            if named and all(named):
                accounts = {a for a in named if a is not None}
                pinned = accounts if pinned is None else pinned & accounts  # keys of one block must all hold
    return pinned


def statement_problems(where: str, statement: Any, accounts: frozenset[str]) -> list[str]:
    if not isinstance(statement, Mapping) or statement.get("Effect") != "Allow":
        return []  # a Deny only narrows access
    if "NotPrincipal" in statement:
        return [f"{where}: Allow with NotPrincipal allows every principal but the ones it names"]
    principal = statement.get("Principal")
    pinned = pinned_accounts(statement.get("Condition"))
    named: list[tuple[str, Any]] = (
        [("AWS", "*")] if principal == "*" else [(k, v) for k, vs in dict(principal or {}).items() for v in _items(vs)]
    )
    problems = []
    for kind, value in named:
        if kind == "AWS" and value != "*":
            account = account_of(str(value))
            if account is None:
                problems.append(f"{where}: principal {value!r} names no account this policy can read")
                continue
            problems += _outside(where, f"principal {value!r}", {account}, accounts)
        elif kind in ("AWS", "Service"):
            who = "Principal '*'" if kind == "AWS" else f"service principal {value!r}"
            if pinned is None:
                problems.append(
                    f"{where}: {who} without a condition that pins the caller's account "
                    "(aws:PrincipalAccount or aws:SourceAccount StringEquals the stack's account)"
                )
            else:
                problems += _outside(where, f"{who} pinned to {sorted(pinned)}", pinned, accounts)
        else:
            problems.append(f"{where}: a {kind} principal ({value!r}) names no account this policy can check")
    return problems


def _outside(where: str, what: str, named: set[str], accounts: frozenset[str]) -> list[str]:
    if not accounts:
        return [
            not_checked(
                f"{where}: {what} names an account and the pack does not know the stack's",
                "set accountIds in the policy config of s3-bucket-policy-within-account",
            )
        ]
    others = sorted(named - accounts)
    return [f"{where}: {what} allows account(s) {', '.join(others)}, outside the stack's"] if others else []


def document_problems(where: str, document: Any, accounts: frozenset[str]) -> list[str]:
    """A bucket policy (a JSON string, as pulumi-aws takes it, or an object); [] for one not known yet."""
    try:
        parsed = policy_document(document)
    except json.JSONDecodeError:
        return [f"{where} is not JSON, so whom it allows cannot be read"]
    if parsed is None or is_unknown(parsed):
        return []
    statements = _items(get(parsed, "Statement"))
    found = [p for i, s in enumerate(statements) for p in statement_problems(f"{where}, statement {i}", s, accounts)]
    return list(dict.fromkeys(found))


def cross_account_violations(resource_type: str, props: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    """A BucketPolicy's document, or a Bucket's inline policy, allows principals of the stack's accounts alone."""
    accounts = frozenset(str(a) for a in config.get("accountIds") or [])
    if resource_type == BUCKET_POLICY:
        return document_problems("the bucket policy", get(props, "policy"), accounts)
    if resource_type == BUCKET:
        return document_problems("the bucket's inline policy", get(props, "policy"), accounts)
    return []
