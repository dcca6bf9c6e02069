"""The bad-node taint as the launcher, the job's manifests and the stack's destroy hook share it: the taint, the pod's
node name, the permission, and the Kubernetes API calls that change a node's taints.

The launcher taints its own node after a failed fabric preflight (trainer/launch/node_taint.py). The job's manifests
give it the node's name and the permission (workloads/job/pod.py, workloads/job/node_access.py), and the autoscaler
reads the taint as the node's status (workloads/platform/autoscaler.py). On a cluster the stack does not manage,
`pulumi destroy` takes the taint off again (infra/bad_node_cleanup.py).

Both writers change a node the same way. They read it, write its new list of taints back with a JSON merge patch (RFC
7386: a list is replaced whole, so the read keeps the others' taints), and send the read's metadata.resourceVersion
with it. The API server takes that as a precondition and answers 409 Conflict if the node changed in between
(kubernetes/kubernetes#63104; the patch handler, staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go). Then
the writer reads the node again.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The taint: its key names the project (a DNS subdomain prefix, as Kubernetes' taint keys allow), its value the reason
# (a label value), its effect keeps new pods off without evicting the node's daemons (which tolerate everything).
BAD_NODE_TAINT_KEY = "fsdp-eks/bad-node"
BAD_NODE_TAINT_EFFECT = "NoSchedule"
# The pod's node, from the downward API (core/v1 ObjectFieldSelector: spec.nodeName).
NODE_NAME_VARIABLE = "NODE_NAME"
NODE_NAME_FIELD = "spec.nodeName"
# What the job's service account may do, and no more: read a node and patch it (workloads/job/node_access.py).
NODE_VERBS = ("get", "patch")
NODES_PATH = "/api/v1/nodes"
CONFLICT_ATTEMPTS = 3  # a node's status changes every few seconds (the kubelet's heartbeat does not: it is a Lease)
TIMEOUT_S = 10.0  # per request: the launcher's pod is on its way out, and the kubelet's grace period runs


class NodeConflictError(RuntimeError):
    """Every attempt to patch the node met a 409 Conflict: it changed between each read and its patch."""


@dataclass(frozen=True)
class ApiServer:
    """Where and how to call the Kubernetes API: the base URL, a bearer token, and the CA file to trust (None: the
    system's, or plain HTTP in tests)."""

    url: str
    token: str
    ca_file: Path | None = None


def node_path(name: str) -> str:
    return f"{NODES_PATH}/{urllib.parse.quote(name, safe='')}"


def call(api: ApiServer, method: str, path: str, patch: dict[str, Any] | None = None) -> dict[str, Any]:
    """One request to the API server: a read, or a JSON merge patch; its answer as JSON. Raises urllib's errors."""
    headers = {"Authorization": f"Bearer {api.token}", "Accept": "application/json"}
    data = None
    if patch is not None:
        data = json.dumps(patch).encode()
        headers["Content-Type"] = "application/merge-patch+json"
    request = urllib.request.Request(api.url + path, data=data, headers=headers, method=method)
    context = ssl.create_default_context(cafile=str(api.ca_file)) if api.ca_file is not None else None
    with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=context) as response:
        return json.loads(response.read())


def taints_patch(node: dict[str, Any], taints: list[dict[str, Any]]) -> dict[str, Any]:
    """The merge patch that sets the taints of `node` (a Node as read) to `taints`, only if the node is unchanged
    since the read."""
    return {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"]}, "spec": {"taints": taints}}


def node_taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    return list((node.get("spec") or {}).get("taints") or [])


def patch_node(api: ApiServer, name: str, patch_for: Callable[[dict[str, Any]], dict[str, Any] | None]) -> bool:
    """Read node `name` and patch it with `patch_for(node)`; on 409 Conflict read it again, up to CONFLICT_ATTEMPTS
    times. True when patched, False when `patch_for` had nothing to change (None). Raises urllib's errors as they
    come, and NodeConflictError."""
    path = node_path(name)
    for _ in range(CONFLICT_ATTEMPTS):
        patch = patch_for(call(api, "GET", path))
        if patch is None:
            return False
        try:
            call(api, "PATCH", path, patch)
            return True
        except urllib.error.HTTPError as error:
            if error.code != 409:  # 409: the node changed since the read; read it again
                raise
    raise NodeConflictError(f"node {name} changed under every one of {CONFLICT_ATTEMPTS} patches (409 Conflict)")
