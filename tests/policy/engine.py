"""Drive the pack's policies the way the engine does, without a policy server: the program's registrations turned
into the engine's view (tests/policy/engine_view.py), each resource's properties wrapped in the SDK's
unknown-checking proxy, every resource validation called per resource with its inputs, every stack validation called
once with all resources, their parents, dependencies and property dependencies."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import unknown_checking_proxy

from policy.pack import POLICIES
from tests.harness.pulumi_program import Registered
from tests.policy.engine_view import AnalyzedResource, engine_view


@dataclass(frozen=True)
class Violation:
    policy: str
    level: EnforcementLevel
    urn: str | None
    message: str


def _opts() -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])


def analyze(resources: Iterable[Registered], config: Mapping[str, Mapping[str, Any]] | None = None) -> list[Violation]:
    """Every policy's violations for the program's registrations, seen as the engine shows them."""
    return analyze_view(engine_view(resources), config)


def analyze_view(
    view: Iterable[AnalyzedResource], config: Mapping[str, Mapping[str, Any]] | None = None
) -> list[Violation]:
    view, config, found = list(view), config or {}, []

    def reporter(policy: ResourceValidationPolicy | StackValidationPolicy, default_urn: str | None):
        level = policy.enforcement_level or EnforcementLevel.MANDATORY
        return lambda message, urn=None: found.append(Violation(policy.name, level, urn or default_urn, message))

    for policy in POLICIES:
        if isinstance(policy, ResourceValidationPolicy):
            for r in view:
                args = ResourceValidationArgs(
                    r.type, unknown_checking_proxy(r.inputs), r.urn, r.name, _opts(), None, config.get(policy.name)
                )
                policy.validate(args, reporter(policy, r.urn))
        else:
            stack = [
                PolicyResource(r.type, unknown_checking_proxy(r.props), r.urn, r.name, _opts(), None, None, [], {})
                for r in view
            ]
            by_urn = {p.urn: p for p in stack}
            for analyzed, resource in zip(view, stack, strict=True):
                resource.parent = by_urn.get(analyzed.parent) if analyzed.parent else None
                resource.dependencies = [by_urn[d] for d in analyzed.dependencies if d in by_urn]
                resource.property_dependencies = {
                    k: [by_urn[d] for d in v if d in by_urn] for k, v in analyzed.property_dependencies.items()
                }
            policy.validate(StackValidationArgs(stack, config.get(policy.name)), reporter(policy, None))
    return found


def mandatory(violations: Iterable[Violation]) -> list[Violation]:
    return [v for v in violations if v.level == EnforcementLevel.MANDATORY]
