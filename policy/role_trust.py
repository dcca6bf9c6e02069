"""Every IAM role of the stack can be assumed only from inside the account: by an AWS service the program's roles
are made for, or through an EKS cluster's OIDC provider in the stack's own account.

Why mandatory: a role's trust policy is the one door into what the role may do. A principal of `*` or of another
account, written by mistake or by a hostile branch, would hand the node role or a pod's role (the Hugging Face
token's secret among what they read) to whoever holds that account; nothing in the cluster would show it.

What "this account" is, to the pack: pulumi-policy 1.21's Python analyzer gives a policy each resource's properties,
its provider's inputs (for the default AWS provider the `aws:*` stack config: the region, and an account only where
the stack sets `aws:allowedAccountIds`), the stack's tags and the pack's own config: of the engine's ConfigureStack
call, which carries the stack's config too, it keeps the tags alone (pulumi_policy/policy.py). Invoke results never
reach an analyzer (pulumi/pulumi proto/pulumi/analyzer.proto: Analyze
and AnalyzeStack carry resources only), so the program's getCallerIdentity does not either. The ARNs of the stack's
own resources are unknown on a first preview and are written by the very program under review. So the account is
the pack's config (`accountIds`, in the file the pipeline passes with --policy-pack-config, reviewed like the pack).
The program's roles need no account principal at all (services only; Pod Identity needs no OIDC provider), so a
stack passes without it; a Federated principal while no account is configured is "not checked".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from policy.props import get, is_unknown, not_checked

ROLE = "aws:iam/role:Role"
# The services the stack's roles are made for, and no other: ec2.amazonaws.com for the node role
# (infra/iam.py), pods.eks.amazonaws.com for the Pod Identity roles of the add-ons and the job (EKS user guide, "Create
# IAM role with trust policy required by EKS Pod Identity"), eks.amazonaws.com for pulumi-eks's cluster role
# (pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts, `${name}-eksRole`).
SERVICE_PRINCIPALS = frozenset({"ec2.amazonaws.com", "eks.amazonaws.com", "pods.eks.amazonaws.com"})
# An EKS cluster's IAM OIDC provider: arn:<partition>:iam::<account>:oidc-provider/oidc.eks.<region>.amazonaws.com
# (.cn in China)/id/<issuer id> (EKS user guide, "Create an IAM OIDC provider for your cluster").
EKS_OIDC_PROVIDER = re.compile(
    r"^arn:aws(?:-cn|-us-gov)?:iam::(?P<account>\d{12}):oidc-provider/"
    r"oidc\.eks\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?/id/[0-9A-Fa-f]+$"
)
CONFIG_SCHEMA: dict[str, Any] = {
    "accountIds": {
        "type": "array",
        "items": {"type": "string", "pattern": "^[0-9]{12}$"},
        "default": [],
        "description": "The AWS account(s) the stack deploys to, whose EKS OIDC providers a role may trust.",
    },
}
_UNKNOWN_DOCUMENT_REMEDY = (
    "build its principals from values known before anything is created (literal service names, the partition and "
    "account data sources) so the policy can read them"
)


def trust_document(props: Mapping[str, Any]) -> Any:
    """The role's assumeRolePolicy as a document: parsed from its JSON string, or as given where a program passes an
    object; UNKNOWN where unknown; None where missing or unreadable."""
    policy = get(props, "assumeRolePolicy")
    if is_unknown(policy) or isinstance(policy, Mapping):
        return policy
    if not isinstance(policy, str):
        return None
    try:
        document = json.loads(policy)
    except ValueError:
        return None
    return document if isinstance(document, Mapping) else None


def _as_list(value: Any) -> list[Any]:
    """A policy element that may be one value or a list of them (IAM JSON policy grammar)."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        return list(value)
    return [value]


def principal_problems(where: str, kind: str, principal: Any, accounts: frozenset[str]) -> list[str]:
    """Why one principal of an Allow statement (`where`) may not assume the role; [] where it may."""
    if is_unknown(principal):
        return [
            not_checked(f"{where}: a principal of kind {kind} is unknown during this preview", _UNKNOWN_DOCUMENT_REMEDY)
        ]
    if principal == "*":
        return [f"{where}: principal {kind} '*' lets anyone with an AWS account assume the role"]
    if kind == "Service":
        if principal in SERVICE_PRINCIPALS:
            return []
        allowed = ", ".join(sorted(SERVICE_PRINCIPALS))
        return [f"{where}: service principal {principal!r} is not one the stack's roles are made for ({allowed})"]
    if kind == "Federated":
        match = EKS_OIDC_PROVIDER.match(principal) if isinstance(principal, str) else None
        if match is None:
            return [f"{where}: federated principal {principal!r} is not an EKS cluster's OIDC provider"]
        if not accounts:
            return [
                not_checked(
                    f"{where}: federated principal {principal!r} names account {match['account']} and the pack does "
                    "not know the stack's account",
                    "set accountIds in the policy config of role-trust-within-account",
                )
            ]
        if match["account"] in accounts:
            return []
        return [f"{where}: federated principal {principal!r} is an OIDC provider of account {match['account']}"]
    return [
        f"{where}: principal {kind} {principal!r}: the stack's roles are assumed only by AWS services "
        f"({', '.join(sorted(SERVICE_PRINCIPALS))}) or the cluster's OIDC provider, never by an account, user or role"
    ]


def statement_problems(index: int, statement: Any, accounts: frozenset[str]) -> list[str]:
    """One statement of a trust policy: an Allow names only principals from inside the account."""
    where = f"trust policy statement {index}"
    if is_unknown(statement) or is_unknown(get(statement, "Effect")):
        return [not_checked(f"{where} (or its Effect) is unknown during this preview", _UNKNOWN_DOCUMENT_REMEDY)]
    if not isinstance(statement, Mapping):
        return [f"{where} is not an object"]
    if statement.get("Effect") != "Allow":
        return []  # a Deny only narrows who may assume the role
    if "NotPrincipal" in statement:
        return [f"{where}: Allow with NotPrincipal allows every principal but the ones it names"]
    principal = statement.get("Principal")
    if is_unknown(principal):
        return [not_checked(f"{where}: its Principal is unknown during this preview", _UNKNOWN_DOCUMENT_REMEDY)]
    if principal == "*":
        return [f"{where}: Principal '*' lets anyone with an AWS account assume the role"]
    if not isinstance(principal, Mapping) or not principal:
        return [f"{where}: Allow without a Principal object"]
    return [
        problem
        for kind, values in principal.items()
        for value in (_as_list(values) if not is_unknown(values) else [values])
        for problem in principal_problems(where, kind, value, accounts)
    ]


def trust_violations(resource_type: str, props: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    """Every role's trust policy allows only the listed services and an EKS OIDC provider of the stack's account."""
    if resource_type != ROLE:
        return []
    document = trust_document(props)
    if is_unknown(document):
        return [
            not_checked(
                "the role's trust policy (assumeRolePolicy) is unknown during this preview", _UNKNOWN_DOCUMENT_REMEDY
            )
        ]
    if document is None:
        return [
            not_checked("the role's trust policy (assumeRolePolicy) is missing or not a JSON object", "give it one")
        ]
    statements = get(document, "Statement")
    if is_unknown(statements) or statements is None:
        state = "unknown during this preview" if is_unknown(statements) else "missing"
        return [not_checked(f"the trust policy's Statement is {state}", _UNKNOWN_DOCUMENT_REMEDY)]
    accounts = frozenset(str(a) for a in config.get("accountIds") or [])
    problems = [p for i, s in enumerate(_as_list(statements)) for p in statement_problems(i, s, accounts)]
    return list(dict.fromkeys(problems))
