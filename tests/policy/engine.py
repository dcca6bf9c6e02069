"""Drive the pack's policies the way the engine does, without a policy server: each resource's properties wrapped
in the SDK's unknown-checking proxy (unknown outputs as the SDK's sentinels), every resource validation called per
resource, every stack validation called once with all resources and their dependencies."""

from __future__ import annotations

import re
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
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

from policy.pack import POLICIES
from tests.harness.pulumi_program import Registered

# How the mock harness writes an output that is unknown during preview (the repr of pulumi.output.Unknown).
HARNESS_UNKNOWN = re.compile(r"^<pulumi\.output\.Unknown object at 0x[0-9a-f]+>$")


@dataclass(frozen=True)
class Violation:
    policy: str
    level: EnforcementLevel
    urn: str | None
    message: str


def engine_props(value: Any) -> Any:
    """Harness inputs as the engine's analyzer request carries them: unknowns as the SDK's sentinel strings."""
    if isinstance(value, Mapping):
        return {k: engine_props(v) for k, v in value.items()}
    if isinstance(value, list):
        return [engine_props(v) for v in value]
    if isinstance(value, str) and HARNESS_UNKNOWN.match(value):
        return UNKNOWN_STRING_VALUE
    return value


def _opts() -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])


def analyze(resources: Iterable[Registered], config: Mapping[str, Mapping[str, Any]] | None = None) -> list[Violation]:
    resources, config, found = list(resources), config or {}, []

    def reporter(policy: ResourceValidationPolicy | StackValidationPolicy, default_urn: str | None):
        level = policy.enforcement_level or EnforcementLevel.MANDATORY
        return lambda message, urn=None: found.append(Violation(policy.name, level, urn or default_urn, message))

    for policy in POLICIES:
        if isinstance(policy, ResourceValidationPolicy):
            for r in resources:
                args = ResourceValidationArgs(r.type, unknown_checking_proxy(engine_props(r.inputs)), r.urn, r.name,
                                              _opts(), None, config.get(policy.name))
                policy.validate(args, reporter(policy, r.urn))
        else:
            stack = [PolicyResource(r.type, unknown_checking_proxy(engine_props(r.inputs)), r.urn, r.name, _opts(),
                                    None, None, [], {}) for r in resources]
            by_urn = {p.urn: p for p in stack}
            for registered, resource in zip(resources, stack, strict=True):
                resource.parent = by_urn.get(registered.parent)
                resource.dependencies = [by_urn[d] for d in registered.dependencies if d in by_urn]
            policy.validate(StackValidationArgs(stack, config.get(policy.name)), reporter(policy, None))
    return found


def mandatory(violations: Iterable[Violation]) -> list[Violation]:
    return [v for v in violations if v.level == EnforcementLevel.MANDATORY]
