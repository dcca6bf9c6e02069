"""Whether AWS allows one request to a resource, across the policies it evaluates: the resource control policies (RCPs)
over the resource's account, the resource's own policy (a bucket policy) and the caller's identity policies. Each
statement's actions, resources and conditions are judged by tests/ci/iam_eval.py; this module adds who the caller is.

The rules (IAM user guide, "Policy evaluation logic" and "Cross-account policy evaluation logic"; AWS Organizations
user guide, "Resource control policies" and "RCP syntax"):
- an explicit Deny in any of the policies ends it;
- an RCP grants nothing: RCPFullAWSAccess, attached to every account once RCPs are enabled, is the only one an Allow
  may be in, so the RCPs given here may only deny; each statement names Principal "*" and has no NotPrincipal or
  NotAction (a document that breaks this is refused, as Organizations refuses it);
- a caller of the resource's account: an Allow in its identity policies, or a resource policy naming its ARN (or
  "*"), is enough; a resource policy naming the account delegates to the account's identity policies;
- a caller of another account needs both: the resource policy naming it (its account, its ARN or "*") and an Allow
  in its identity policies;
- an AWS service principal has no identity policies here: the resource policy must name the service (or "*");
- an anonymous request: only a resource policy's "*".
A resource policy may name "*", {"AWS": ...} account ids, account root ARNs, IAM role or user ARNs, and
{"Service": ...}; any other form is refused, not guessed. Left out: SCPs, permissions boundaries and session
policies (none of the questions asked through this module turns on them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tests.ci.iam_eval import applies

Grant = Literal["direct", "account"]
ACCOUNT_ID = re.compile(r"^\d{12}$")
ROOT_ARN = re.compile(r"^arn:aws[a-z-]*:iam::(?P<account>\d{12}):root$")
IAM_ARN = re.compile(r"^arn:aws[a-z-]*:iam::(?P<account>\d{12}):(?:role|user)/")
RCP_ELEMENTS = frozenset({"Sid", "Effect", "Principal", "Action", "Resource", "NotResource", "Condition"})


@dataclass(frozen=True)
class Caller:
    """Who sends a request: an IAM role or user (its ARN, and the identity policies it holds), an AWS service
    principal (and the account it acts for, if the service passes one), or nobody (anonymous)."""

    arn: str | None = None
    identity_policies: Sequence[Mapping[str, Any]] = ()
    service: str | None = None
    source_account: str | None = None
    # Keys a test sets as the request context would carry them for this caller, over the derived ones.
    extra_context: Mapping[str, str] = field(default_factory=dict[str, str])

    @property
    def account(self) -> str | None:
        match = IAM_ARN.match(self.arn or "")
        return match["account"] if match else None

    def context(self) -> dict[str, str]:
        """The global keys AWS puts in the request context for this caller (IAM user guide, "AWS global condition
        context keys": aws:PrincipalArn and aws:PrincipalAccount for a signed request of an IAM principal,
        aws:PrincipalIsAWSService for every signed request, aws:SourceAccount when a service acts for a resource's
        owner). Nothing is derived for an anonymous request."""
        context: dict[str, str] = {}
        if self.arn is not None:
            account = self.account
            if account is None:
                raise ValueError(f"not an IAM role or user ARN: {self.arn}")
            context |= {"aws:PrincipalArn": self.arn, "aws:PrincipalAccount": account}
            context["aws:PrincipalIsAWSService"] = "false"
        elif self.service is not None:
            context["aws:PrincipalIsAWSService"] = "true"
            if self.source_account is not None:
                context["aws:SourceAccount"] = self.source_account
        return context | dict(self.extra_context)


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _names(principal: Any, caller: Caller) -> Grant | None:
    """How a resource policy's Principal element names the caller: directly, through its account, or not at all."""
    if principal == "*":
        return "direct"
    if not isinstance(principal, Mapping) or not set(principal) <= {"AWS", "Service"}:
        raise ValueError(f"principal form not modelled: {principal!r}")
    for service in _items(principal.get("Service", [])):
        if caller.service is not None and service == caller.service:
            return "direct"
    grants: set[Grant] = set()
    for name in _items(principal.get("AWS", [])):
        root = ROOT_ARN.match(name)
        if ACCOUNT_ID.match(name) or root:
            account = root["account"] if root else name
            if caller.account == account:
                grants.add("account")
        elif IAM_ARN.match(name):
            if caller.arn == name:
                grants.add("direct")
        else:
            raise ValueError(f"principal not modelled: {name!r}")
    return "direct" if "direct" in grants else ("account" if grants else None)


def check_rcp(document: Mapping[str, Any]) -> None:
    """Refuse what Organizations refuses in an RCP ("RCP syntax")."""
    for statement in _items(document["Statement"]):
        if not set(statement) <= RCP_ELEMENTS:
            raise ValueError(f"element not allowed in an RCP: {sorted(set(statement) - RCP_ELEMENTS)}")
        if statement["Effect"] != "Deny":
            raise ValueError("an RCP statement may only deny")
        if statement.get("Principal") != "*":
            raise ValueError('an RCP statement names Principal "*"')


def _statements(
    policy: Mapping[str, Any], action: str, resource: str, context: Mapping[str, Any]
) -> list[Mapping[str, Any]]:
    return [s for s in _items(policy["Statement"]) if applies(s, action, resource, context)]


def request_allowed(
    caller: Caller,
    action: str,
    resource: str,
    resource_account: str,
    *,
    resource_policy: Mapping[str, Any] | None = None,
    rcps: Sequence[Mapping[str, Any]] = (),
    context: Mapping[str, Any] | None = None,
) -> bool:
    full_context = caller.context() | dict(context or {})
    for rcp in rcps:
        check_rcp(rcp)
        if _statements(rcp, action, resource, full_context):  # every statement is a Deny to "*"
            return False
    identity = [s for p in caller.identity_policies for s in _statements(p, action, resource, full_context)]
    named: list[tuple[str, Grant]] = []
    for statement in _statements(resource_policy or {"Statement": []}, action, resource, full_context):
        if "NotPrincipal" in statement:
            raise ValueError("NotPrincipal not modelled")
        grant = _names(statement["Principal"], caller)
        if grant is not None:
            named.append((statement["Effect"], grant))
    if any(s["Effect"] == "Deny" for s in identity) or any(effect == "Deny" for effect, _ in named):
        return False
    identity_allows = any(s["Effect"] == "Allow" for s in identity)
    grants = {grant for effect, grant in named if effect == "Allow"}
    if caller.arn is None:  # a service or anonymous: no identity policies of its own here
        return "direct" in grants
    if caller.account == resource_account:
        return identity_allows or "direct" in grants
    return identity_allows and bool(grants)
