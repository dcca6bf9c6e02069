"""A TrainJob's ClusterTrainingRuntime as the checks read it, and the check that its pods ask for what their node
type has (policy/jobs/pods.py, the PyTorchJob's rule too).

The runtime holds the pod template: a TrainJob names the runtime and adds image, command and node count, so the
node selector and the GPU and EFA requests the checks need are in the runtime alone. The trainer step is the
replicated job labelled trainer.kubeflow.org/trainjob-ancestor-step=trainer; it runs mlPolicy.numNodes pods
(kubeflow/trainer v2.3.0, pkg/constants/constants.go, pkg/runtime/core/trainingruntime.go).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policy.jobs.pods import Replica, pinned_instance, replica_count, request_problems
from policy.jobs.reader import JobReader, PolicyInfo
from policy.props import get, has_unknown, is_unknown, not_checked
from stack.job_api import ANCESTOR_LABEL, RUNTIME_KIND, TRAINER_ANCESTOR, TRAINER_API_VERSION, TRAINJOB

RUNTIME = f"kubernetes:{TRAINER_API_VERSION}:{RUNTIME_KIND}"


def runtime_replicas(props: Mapping[str, Any]) -> list[Replica]:
    """The runtime's trainer step as one Replica: its pod template and mlPolicy.numNodes pods."""
    jobs = get(props, "spec", "template", "spec", "replicatedJobs")
    if not isinstance(jobs, Sequence) or isinstance(jobs, str):
        return []
    nodes = replica_count(get(props, "spec", "mlPolicy", "numNodes"))
    return [
        Replica(str(get(job, "name")), nodes, get(job, "template", "spec", "template", "spec") or {})
        for job in jobs
        if isinstance(job, Mapping) and get(job, "template", "metadata", "labels", ANCESTOR_LABEL) == TRAINER_ANCESTOR
    ]


def runtime_node_type_violations(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """The trainer step's pods are pinned to a catalog instance type and ask for all of its GPUs and EFA devices."""
    if resource_type != RUNTIME:
        return []
    jobs = get(props, "spec", "template", "spec", "replicatedJobs")
    steps = runtime_replicas(props)
    if not steps:
        # Without a step it can see, the check has nothing to hold to the node type: an unknown list (or a step whose
        # labels are unknown) may hold the trainer step.
        unknown = is_unknown(jobs) or any(has_unknown(get(j, "template", "metadata", "labels")) for j in jobs or [])
        where = (
            "are unknown during this preview"
            if unknown
            else f"have no step labelled {ANCESTOR_LABEL}={TRAINER_ANCESTOR}"
        )
        return [
            not_checked(
                f"the runtime's replicatedJobs {where}",
                "give the trainer step its label and pod template as literals",
            )
        ]
    problems: list[str] = []
    for replica in steps:
        instance, found = pinned_instance(replica)
        problems += found
        if instance is not None:
            problems += request_problems(replica, instance)
    return problems


class TrainJobReader(JobReader):
    """A TrainJob's ClusterTrainingRuntime: its trainer step holds the pods; a TrainJob has no elastic range, so it runs
    on all mlPolicy.numNodes nodes."""

    name = TRAINJOB
    resource_type = RUNTIME
    nodes_path = ("spec", "mlPolicy", "numNodes")
    node_type_policy = PolicyInfo(
        "training-runtime-matches-node-type",
        "A TrainJob's runtime pins its pods to a catalog instance type and requests all of its GPUs and EFA devices.",
    )

    def replicas(self, props: Mapping[str, Any]) -> list[Replica]:
        return runtime_replicas(props)

    def fewest_nodes(self, total: int, written: Any) -> int:
        return total

    def node_type_violations(self, resource_type: str, props: Mapping[str, Any]) -> list[str]:
        return runtime_node_type_violations(resource_type, props)
