"""The PyTorchJob as the checks read it (`PyTorchJobReader`), and the check that its pods ask for what their node type
has (policy/jobs/pods.py), with one process per GPU. What the check needs and cannot read (a value unknown during the
preview) is "not checked", never a pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.jobs.pods import Replica, pinned_instance, replica_count, request_problems
from policy.jobs.reader import JobReader, PolicyInfo
from policy.props import as_int, get, is_unknown, not_checked
from sizing.catalog import InstanceType
from stack.job_api import PYTORCHJOB, PYTORCHJOB_API_VERSION, PYTORCHJOB_KIND

PYTORCHJOB_TYPE = f"kubernetes:{PYTORCHJOB_API_VERSION}:{PYTORCHJOB_KIND}"


def replicas(props: Mapping[str, Any]) -> list[Replica]:
    """The job's replica types; one whose whole spec is unknown is a Replica with an unknown pod template."""
    specs = get(props, "spec", "pytorchReplicaSpecs")
    if not isinstance(specs, Mapping):
        return []
    return [
        Replica(role, replica_count(get(spec, "replicas")), get(spec, "template", "spec") or {})
        for role, spec in specs.items()
        if isinstance(spec, Mapping) or is_unknown(spec)
    ]


def node_type_violations(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """Each replica is pinned to a catalog instance type and asks for all of its GPUs and EFA devices."""
    if resource_type != PYTORCHJOB_TYPE:
        return []
    specs = get(props, "spec", "pytorchReplicaSpecs")
    if not isinstance(specs, Mapping):
        state = "unknown during this preview" if is_unknown(specs) else "missing"
        return [not_checked(f"spec.pytorchReplicaSpecs is {state}", "give the job its replica specs as literals")]
    problems: list[str] = []
    for replica in replicas(props):
        instance, found = pinned_instance(replica)
        problems += found
        if instance is not None:
            problems += request_problems(replica, instance)
            problems += _nproc_problems(props, replica, instance)
    return list(dict.fromkeys(problems))  # replicas on one type would repeat the nprocPerNode finding


def _nproc_problems(props: Mapping[str, Any], replica: Replica, instance: InstanceType) -> list[str]:
    """nprocPerNode (the operator's PET_NPROC_PER_NODE) is one process per GPU; 'auto'/'gpu' let torchrun count."""
    nproc = get(props, "spec", "nprocPerNode")
    if is_unknown(nproc):
        return [not_checked("spec.nprocPerNode is unknown during this preview", "give it a literal value")]
    count = as_int(nproc)
    if count is None or count == instance.gpus:
        return []
    return [f"spec.nprocPerNode is {count} but {instance.name} has {instance.gpus} GPUs per node"]


class PyTorchJobReader(JobReader):
    """A kubeflow.org/v1 PyTorchJob: its replica specs hold the pods; an elastic job runs on minReplicas or more."""

    name = PYTORCHJOB
    resource_type = PYTORCHJOB_TYPE
    nodes_path = ("spec", "elasticPolicy", "minReplicas")
    node_type_policy = PolicyInfo(
        "pytorchjob-matches-node-type",
        "PyTorchJob pods are pinned to a catalog instance type and request all of its GPUs and EFA devices.",
    )

    def replicas(self, props: Mapping[str, Any]) -> list[Replica]:
        return replicas(props)

    def fewest_nodes(self, total: int, written: Any) -> int:
        minimum = as_int(written)
        return min(total, minimum) if minimum else total

    def node_type_violations(self, resource_type: str, props: Mapping[str, Any]) -> list[str]:
        return node_type_violations(resource_type, props)
