"""A job's pods as the checks read them, whatever its job API: its replica types (`Replica`), and the rule that each
one's pods are pinned to a catalog instance type and ask for all of its GPUs and EFA devices.

Why: a pod asking for more GPUs or EFA devices than its node type has stays Pending forever (on nodes billed by the
hour); one asking for fewer leaves GPUs idle or, without every EFA device, sends NCCL's traffic over fewer links.
The job spans whole nodes, one torchrun agent per node over all of its GPUs, so requests equal the catalog's counts.
What the check needs and cannot read (a value unknown during the preview) is "not checked", never a pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policy.props import as_int, get, is_unknown, not_checked
from sizing.catalog import CATALOG, InstanceType
from stack.node_contract import EFA_RESOURCE, GPU_RESOURCE

# The well-known node label with the EC2 instance type, and its deprecated beta spelling.
INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")


@dataclass(frozen=True)
class Replica:
    """One replica type of the job (a PyTorchJob's Master or Worker, a runtime's trainer step): its pod template and how
    many pods."""

    role: str
    replicas: Any  # an int, None where not given, UNKNOWN where unknown during the preview
    pod_spec: Mapping[str, Any]

    @property
    def instance_type(self) -> Any:
        selector = get(self.pod_spec, "nodeSelector")
        if is_unknown(selector):
            return selector
        for label in INSTANCE_TYPE_LABELS:
            value = get(selector, label)
            if value is not None:
                return value
        return None

    @property
    def containers(self) -> list[Mapping[str, Any]]:
        containers = get(self.pod_spec, "containers")
        if not isinstance(containers, Sequence) or isinstance(containers, str):
            return []
        return [c for c in containers if isinstance(c, Mapping)]


def replica_count(value: Any) -> Any:
    """A replica count as an int, None where not given, UNKNOWN where unknown."""
    return value if is_unknown(value) else as_int(value)


def container_count(container: Mapping[str, Any], resource: str) -> tuple[int | None, int | None]:
    """(request, limit) of an extended resource; a limit alone also sets the request (Kubernetes defaulting)."""
    request = as_int(get(container, "resources", "requests", resource))
    limit = as_int(get(container, "resources", "limits", resource))
    return (request if request is not None else limit), limit


def _counts_unknown(replica: Replica, resource: str) -> bool:
    """Whether the pod's containers, or a request or limit of `resource` in one of them, is unknown."""
    containers = get(replica.pod_spec, "containers")
    if is_unknown(containers):
        return True
    listed = containers if isinstance(containers, Sequence) and not isinstance(containers, str) else []
    return any(is_unknown(get(c, "resources", s, resource)) for c in listed for s in ("requests", "limits"))


def pod_count(replica: Replica, resource: str) -> tuple[int, list[str]]:
    """The pod's total of `resource` over its containers (init containers run before and hold it only then), and
    problems with how it is asked for."""
    total, problems = 0, []
    for container in replica.containers:
        request, limit = container_count(container, resource)
        if request is not None and limit is not None and request != limit:
            problems.append(
                f"{replica.role} container {container.get('name')!r}: {resource} request {request} != limit {limit} "
                "(extended resources cannot be overcommitted)"
            )
        total += request or 0
    return total, problems


def pinned_instance(replica: Replica) -> tuple[InstanceType | None, list[str]]:
    """The catalog instance type the replica's pods are pinned to (the TrainJob's runtime too), or None with the
    problem that stops its checks: no node selector, a type the catalog does not know, or a selector unknown during
    the preview ("not checked")."""
    name = replica.instance_type
    if is_unknown(name):
        return None, [
            not_checked(
                f"the instance type {replica.role} pods are pinned to is unknown during this preview",
                f"set nodeSelector {INSTANCE_TYPE_LABELS[0]} to a literal catalog type",
            )
        ]
    if name is None:
        return None, [
            f"{replica.role} pods have no nodeSelector {INSTANCE_TYPE_LABELS[0]}; pin them to the GPU nodes' "
            "instance type so their GPU and EFA requests can be checked against it"
        ]
    instance = CATALOG.get(name)
    if instance is None:
        return None, [f"{replica.role} pods select instance type {name!r}, which the catalog does not know"]
    return instance, []


def request_problems(replica: Replica, instance: InstanceType) -> list[str]:
    """The replica's pods ask for all of the node type's GPUs and EFA devices (the TrainJob's runtime too)."""
    unknown = [r for r in (GPU_RESOURCE, EFA_RESOURCE) if _counts_unknown(replica, r)]
    if unknown:
        return [
            not_checked(
                f"the {' and '.join(unknown)} requests of {replica.role} pods are unknown during this preview",
                "write the containers and their resources as literals",
            )
        ]
    problems: list[str] = []
    gpus, gpu_problems = pod_count(replica, GPU_RESOURCE)
    efas, efa_problems = pod_count(replica, EFA_RESOURCE)
    problems += gpu_problems + efa_problems
    if gpus != instance.gpus:
        problems.append(
            f"{replica.role} pods request {gpus} {GPU_RESOURCE} but {instance.name} has {instance.gpus}; "
            "request all of the node's GPUs"
        )
    if efas != instance.efa_interfaces:
        want = f"all {instance.efa_interfaces}" if instance.supports_efa else "none (no EFA on this type)"
        problems.append(f"{replica.role} pods request {efas} {EFA_RESOURCE} on {instance.name}; expected {want}")
    return problems
