"""The program's registrations as the Pulumi engine shows them to a policy pack during `pulumi preview`.

From the mock harness's records (tests/harness: run_program, ideally with preview="first" or "update"):
- a custom resource or a component of the program's own: its inputs, for the resource policies (the step generator
  sends `inputs` to Analyze) and, for the stack policies, the same properties (AnalyzeStack gets each resource's
  outputs; a provider's preview of a create echoes its inputs and leaves computed outputs unknown), with its parent,
  dependencies and property dependencies (pulumi/pulumi pkg/resource/deploy/step_generator.go, analyzeAll and
  AnalyzeResources);
- a remote component: no inputs at all, its registered outputs (unknown here), and the children its provider
  registers, with their inputs (tests/policy/remote_children.py);
- an unknown value (an id or output of a resource a first preview has not created) as the SDK's unknown sentinel.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

from tests.harness.mock_runner import UNKNOWN_MARKER
from tests.harness.pulumi_program import Registered
from tests.policy.remote_children import REMOTE_OUTPUTS, children


@dataclass(frozen=True)
class AnalyzedResource:
    """One resource as the analyzer receives it."""

    type: str
    urn: str
    name: str
    inputs: dict[str, Any]  # what a resource policy sees
    props: dict[str, Any]  # what a stack policy sees
    parent: str | None = None
    dependencies: tuple[str, ...] = ()
    property_dependencies: dict[str, tuple[str, ...]] = field(default_factory=dict)


def engine_props(value: Any) -> Any:
    """Harness values as the analyzer request carries them: unknowns as the SDK's sentinel strings."""
    if isinstance(value, Mapping):
        return {k: engine_props(v) for k, v in value.items()}
    if isinstance(value, list):
        return [engine_props(v) for v in value]
    if value == UNKNOWN_MARKER:
        return UNKNOWN_STRING_VALUE
    return value


def engine_view(resources: Iterable[Registered]) -> list[AnalyzedResource]:
    view: list[AnalyzedResource] = []
    for resource in resources:
        inputs = engine_props(resource.inputs)
        if not resource.remote:
            view.append(_as_analyzed(resource, inputs))
            continue
        outputs = {name: UNKNOWN_STRING_VALUE for name in REMOTE_OUTPUTS.get(resource.type, ())}
        built, urns = children(resource, inputs)
        view.append(
            AnalyzedResource(
                resource.type,
                resource.urn,
                resource.name,
                {},
                outputs,
                resource.parent or None,
                tuple(resource.dependencies),
                {},
            )
        )
        for child, urn in zip(built, urns, strict=True):
            deps = {k: tuple(v) for k, v in child.property_dependencies.items()}
            all_deps = tuple(dict.fromkeys([*resource.dependencies, *(u for v in deps.values() for u in v)]))
            view.append(
                AnalyzedResource(child.type, urn, child.name, child.inputs, child.inputs, resource.urn, all_deps, deps)
            )
    return view


def _as_analyzed(resource: Registered, inputs: dict[str, Any]) -> AnalyzedResource:
    deps = {k: tuple(v) for k, v in resource.property_dependencies.items()}
    return AnalyzedResource(
        resource.type,
        resource.urn,
        resource.name,
        inputs,
        inputs,
        resource.parent or None,
        tuple(resource.dependencies),
        deps,
    )
