"""On an existing cluster, `pulumi destroy` takes the launcher's bad-node taint off every node it left it on.

The launcher taints a node that failed the fabric preflight (trainer/launch/node_taint.py; the taint and the node edits
are trainer/base/pod/bad_node.py). On the stack's own cluster the node goes with its group; on a cluster the stack does
not manage, the node stays, and so would the taint, keeping every later workload that tolerates the GPU taint but not
ours off a node that may well be fine again. So the ExistingCluster component carries a before-delete resource hook
(Pulumi "Resource option: hooks"): the engine runs it when it deletes the component, which is after the job and the
platform, which depend on it, so no pod of the job is left to taint a node again. Delete hooks make the engine refuse
`pulumi destroy` without `--run-program` (pulumi/pulumi 3.182.0 changelog, "Prevent destroy without running the program
if any resource have delete hooks"; the hook is the program's code), which docs/aws.md says.

The hook reaches the cluster as the Kubernetes provider does: its endpoint and certificate authority from
`aws eks describe-cluster`, a token from `aws eks get-token` (infra/existing_cluster.py token_command), then the
Kubernetes API: the nodes listed, and each tainted one patched with its other taints, as the launcher patches its node
(trainer/base/pod/bad_node.py patch_node: a JSON merge patch with the resourceVersion read; read again on 409 Conflict).
The hook runs in the Pulumi program's own process, not in the cluster.
"""

from __future__ import annotations

import base64
import json
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi

from infra.existing_cluster import token_command
from trainer.base.pod.bad_node import (
    BAD_NODE_TAINT_KEY,
    NODES_PATH,
    ApiServer,
    call,
    node_taints,
    patch_node,
    taints_patch,
)

HOOK_NAME = "remove-bad-node-taints"


def without_bad_node_taint(node: dict[str, Any]) -> dict[str, Any] | None:
    """The merge patch that takes the bad-node taint off `node` (as read) if it is unchanged since; None if it has
    none."""
    taints = node_taints(node)
    kept = [t for t in taints if t.get("key") != BAD_NODE_TAINT_KEY]
    return None if len(kept) == len(taints) else taints_patch(node, kept)


def clean_node(api: ApiServer, name: str) -> bool:
    """Take the taint off node `name`; True if it carried it."""
    return patch_node(api, name, without_bad_node_taint)


def clean_cluster(api: ApiServer) -> list[str]:
    """Every node of the cluster without the bad-node taint; the names of those that carried it."""
    nodes = call(api, "GET", NODES_PATH).get("items") or []
    tainted = [n["metadata"]["name"] for n in nodes if without_bad_node_taint(n) is not None]
    return [name for name in tainted if clean_node(api, name)]


def _aws(args: list[str]) -> dict[str, Any]:
    return json.loads(subprocess.run(args, check=True, capture_output=True, text=True, timeout=60).stdout)


def cluster_api(cluster_name: str, region: str, workdir: Path, aws: Callable = _aws) -> ApiServer:
    """The cluster's API server, as whoever runs `pulumi` reaches it (the AWS CLI v2 the existing cluster needs)."""
    described = aws(["aws", "eks", "describe-cluster", "--name", cluster_name, "--region", region, "--output", "json"])
    cluster = described["cluster"]
    ca_file = workdir / "ca.crt"
    ca_file.write_bytes(base64.b64decode(cluster["certificateAuthority"]["data"]))
    token = aws(token_command(cluster_name, region))["status"]["token"]
    return ApiServer(cluster["endpoint"], token, ca_file)


def bad_node_cleanup(cluster_name: str, region: str) -> pulumi.ResourceHook:
    """The before-delete hook of the ExistingCluster component."""

    def remove_taints(args: pulumi.ResourceHookArgs) -> None:
        with tempfile.TemporaryDirectory() as workdir:
            cleaned = clean_cluster(cluster_api(cluster_name, region, Path(workdir)))
        pulumi.log.info(
            f"{cluster_name}: {BAD_NODE_TAINT_KEY} removed from {', '.join(cleaned)}"
            if cleaned
            else f"{cluster_name}: no node carries {BAD_NODE_TAINT_KEY}"
        )

    return pulumi.ResourceHook(HOOK_NAME, remove_taints)
