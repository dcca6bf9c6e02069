"""A TrainJob's ClusterTrainingRuntime as the checks read it, and the check that its pods ask for what their node
type has (the same rule as the PyTorchJob's, policy/pytorchjob.py).

The runtime holds the pod template: a TrainJob names the runtime and adds image, command and node count, so the
node selector and the GPU and EFA requests the checks need are in the runtime alone. The trainer step is the
replicated job labelled trainer.kubeflow.org/trainjob-ancestor-step=trainer; it runs mlPolicy.numNodes pods
(kubeflow/trainer v2.3.0, pkg/constants/constants.go, pkg/runtime/core/trainingruntime.go).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policy.props import get, has_unknown, is_unknown, not_checked
from policy.pytorchjob import Replica, pinned_instance, replica_count, request_problems
from stack.job_api import ANCESTOR_LABEL, RUNTIME_KIND, TRAINER_ANCESTOR, TRAINER_API_VERSION

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
