"""The order `pulumi destroy` deletes a stack's resources in, computed from what the program registered.

This is the Pulumi engine's own rule (github.com/pulumi/pulumi, pkg/resource/graph/dependency_graph.go
`DependenciesOf`, used by pkg/resource/deploy/step_generator.go `ScheduleDeletes`): a resource depends on its
provider, its parent, its explicit dependencies and its property dependencies; a dependency on a component also
counts every descendant of the component registered before the dependent (remote components such as pulumi-eks's
report only themselves as a dependency). Deletion runs in rounds: a resource is deleted only after everything that
depends on it is gone; resources with no path between them may be deleted at the same time, in any order.
"""

from __future__ import annotations

from collections.abc import Iterable

from tests.harness.pulumi_program import Registered


def _provider_urn(reference: str) -> str:
    """A provider reference is "<urn>::<id>"."""
    return reference.rsplit("::", 1)[0] if reference else ""


def dependency_graph(resources: Iterable[Registered]) -> dict[str, set[str]]:
    """URN -> the URNs it depends on directly, as the engine's DependenciesOf computes them."""
    ordered = list(resources)
    position = {r.urn: index for index, r in enumerate(ordered)}
    by_urn = {r.urn: r for r in ordered}
    children: dict[str, list[str]] = {}
    for r in ordered:
        if r.parent in position:
            children.setdefault(r.parent, []).append(r.urn)

    def descendants(urn: str) -> list[str]:
        found, stack = [], list(children.get(urn, []))
        while stack:
            child = stack.pop()
            found.append(child)
            stack += children.get(child, [])
        return found

    graph: dict[str, set[str]] = {}
    for r in ordered:
        direct = set(r.dependencies)
        for urns in r.property_dependencies.values():
            direct |= set(urns)
        if provider := _provider_urn(r.provider):
            direct.add(provider)
        deps = {d for d in direct if d in position}
        for d in list(deps):
            if not by_urn[d].custom:
                deps |= {c for c in descendants(d) if position[c] < position[r.urn]}
        if r.parent in position:
            deps.add(r.parent)
        graph[r.urn] = deps
    return graph


def depends_on(graph: dict[str, set[str]], dependent: str, dependency: str) -> bool:
    """Whether `dependent` (transitively) depends on `dependency`, so destroy deletes it first."""
    seen, stack = set(), [dependent]
    while stack:
        urn = stack.pop()
        for d in graph.get(urn, ()):
            if d == dependency:
                return True
            if d not in seen:
                seen.add(d)
                stack.append(d)
    return False


def deletion_rounds(graph: dict[str, set[str]]) -> list[list[str]]:
    """The rounds `pulumi destroy` deletes in, first round first. As ScheduleDeletes does, the rounds are built
    bottom-up (each holds the resources whose dependencies are all in earlier rounds) and then reversed."""
    condemned, rounds = set(graph), []
    while condemned:
        ready = sorted(urn for urn in condemned if not (graph[urn] & condemned))
        if not ready:
            raise ValueError(f"dependency cycle among {sorted(condemned)}")
        rounds.append(ready)
        condemned -= set(ready)
    return list(reversed(rounds))
