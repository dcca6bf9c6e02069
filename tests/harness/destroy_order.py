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


# --- What Kubernetes still does after the engine has seen an object deleted.
# The engine waits for an object to be gone (pulumi-kubernetes awaits deletion until the API server answers 404), not
# for what controllers do next. A dynamically provisioned volume is one such thing: once its claim is gone, the
# PersistentVolume controller has the volume's provisioner delete it (kubernetes pkg/controller/volume/
# persistentvolume, reclaimVolume with reclaimPolicy Delete), which needs the CSI driver's controller running, on a
# node, with its credentials. A statically provisioned PersistentVolume the stack creates is different: the engine
# waits for it, and the CSI attacher holds it with a finalizer until its volume is detached (kubernetes-csi/
# external-attacher, csi_handler.go addPVFinalizer); the stack then deletes the volume itself.
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
CLAIM = "kubernetes:core/v1:PersistentVolumeClaim"
RELEASE = "kubernetes:helm.sh/v3:Release"


def _claim_templates(value: object) -> list[dict]:
    """Every volumeClaimTemplate in a chart's values (a StatefulSet's claims, made by its controller)."""
    found: list[dict] = []
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "volumeClaimTemplate" and isinstance(inner, dict):
                found.append(inner)
            else:
                found += _claim_templates(inner)
    elif isinstance(value, list):
        for inner in value:
            found += _claim_templates(inner)
    return found


def volumes_left_to_drivers(resources: Iterable[Registered]) -> list[tuple[Registered, str]]:
    """(object, provisioner) for each object whose deletion leaves a volume for its provisioner to delete after the
    engine has moved on: a claim the stack creates with no PersistentVolume named (dynamic), or a StatefulSet's claim
    template in a release's values, unless the stack creates a statically bound claim of that class itself (the
    StatefulSet then takes it by its name). Only classes that delete their volumes count; a Retain class keeps them
    on purpose."""
    resources = list(resources)
    deleting = {
        r.inputs["metadata"]["name"]: r.inputs["provisioner"]
        for r in resources
        if r.type == STORAGE_CLASS and r.inputs.get("reclaimPolicy", "Delete") == "Delete"
    }
    claims = [r for r in resources if r.type == CLAIM]
    static_classes = {c.inputs["spec"].get("storageClassName") for c in claims if c.inputs["spec"].get("volumeName")}
    left: list[tuple[Registered, str]] = []
    for claim in claims:
        spec = claim.inputs["spec"]
        if not spec.get("volumeName") and spec.get("storageClassName") in deleting:
            left.append((claim, deleting[spec["storageClassName"]]))
    for release in (r for r in resources if r.type == RELEASE):
        for template in _claim_templates(release.inputs.get("values") or {}):
            storage_class = (template.get("spec") or {}).get("storageClassName")
            if storage_class in deleting and storage_class not in static_classes:
                left.append((release, deleting[storage_class]))
    return left
