"""What the job's pods may do to their nodes: read one and patch it, so that a launcher that found its node's fabric
bad (EXIT_BAD_NODE) can taint it (trainer/launch/node_taint.py) and no pod of the job is scheduled there again.

A ClusterRole (nodes are cluster-scoped, so a namespaced Role cannot name them) with get and patch on nodes, bound to
the job's service account alone. It cannot be narrowed by resourceNames: the node a pod lands on is known only once it
is scheduled. What it allows is what `kubectl taint` and `kubectl label` on a node need; a pod of the job could also
cordon or relabel any node with it, which is why it is granted to this service account and no other.

Pure functions of a JobSpec returning plain dicts.
"""

from __future__ import annotations

from typing import Any

from trainer.launch.node_taint import NODE_VERBS
from workloads.job.pod import labels
from workloads.job.spec import JobSpec

RBAC_API_VERSION = "rbac.authorization.k8s.io/v1"
RBAC_GROUP = "rbac.authorization.k8s.io"


def node_access_name(spec: JobSpec) -> str:
    """Cluster-scoped, so named after the namespace and the job: two stacks' jobs on one cluster never share it."""
    return f"{spec.namespace}-{spec.name}-node-taint"


def node_cluster_role(spec: JobSpec) -> dict[str, Any]:
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": "ClusterRole",
        "metadata": {"name": node_access_name(spec), "labels": labels(spec)},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": list(NODE_VERBS)}],
    }


def node_cluster_role_binding(spec: JobSpec) -> dict[str, Any]:
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": node_access_name(spec), "labels": labels(spec)},
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": node_access_name(spec)},
        "subjects": [{"kind": "ServiceAccount", "name": spec.service_account, "namespace": spec.namespace}],
    }


def node_access_objects(spec: JobSpec) -> list[dict[str, Any]]:
    """The role, then its binding to the job's service account."""
    return [node_cluster_role(spec), node_cluster_role_binding(spec)]
