"""The launcher's last act after a failed fabric preflight (EXIT_BAD_NODE): it taints its own node, so that the pod the
job's controller creates again, and every other pod of the job, is scheduled elsewhere. The taint, the node's name,
the permission and the read-then-patch of a node are the contract in trainer/base/pod/bad_node.py, which the job's
manifests and the stack's destroy hook share.

Why a taint, and not only the exit code: the Training Operator creates the pod again on a retryable code (>= 128,
trainer/base/pod/exits.py), and a JobSet recreates the whole gang; neither remembers the node, and the scheduler would
put the new pod back on the one free GPU node, the bad one. The pods tolerate the GPU taint only
(workloads/job/pod.py), so a node carrying BAD_NODE_TAINT_KEY takes none of them: the new pod lands on a spare node or
stays Pending until the node is repaired or replaced (docs/aws.md, "Bad nodes").

How: the pod's own service account (its token and CA are mounted at SERVICE_ACCOUNT_DIR, the API server's address is
in KUBERNETES_SERVICE_HOST/PORT, as client-go's rest.InClusterConfig reads them), the node's name from the downward API
(NODE_NAME_VARIABLE, spec.nodeName), and a ClusterRole allowing get and patch on nodes, which an admission policy
narrows to adding this taint to the pod's own node (workloads/job/node_access.py).

Never fatal: any failure (no API server, no permission, no node name) is one line in the log, and the exit code stands.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainer.base.pod.bad_node import (
    BAD_NODE_TAINT_EFFECT,
    BAD_NODE_TAINT_KEY,
    NODE_NAME_VARIABLE,
    ApiServer,
    NodeConflictError,
    node_path,
    node_taints,
    patch_node,
    taints_patch,
)

DEFAULT_REASON = "preflight"
# Where the kubelet mounts the service account's token and the cluster's CA (Kubernetes docs, "Accessing the
# Kubernetes API from a Pod"; client-go rest.InClusterConfig).
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
HOST_VARIABLE, PORT_VARIABLE = "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"
# A label value (and so a taint's value): at most 63 characters, alphanumerics at both ends, -_. between.
_LABEL_VALUE_MAX = 63
_NOT_IN_VALUE = re.compile(r"[^A-Za-z0-9_.-]+")


class TaintError(RuntimeError):
    """The node could not be tainted; the message says why."""


def in_cluster(env: Mapping[str, str] = os.environ, account_dir: Path = SERVICE_ACCOUNT_DIR) -> ApiServer | None:
    """The API server as a pod sees it; None outside a pod (no KUBERNETES_SERVICE_HOST, or no token mounted)."""
    host, port = env.get(HOST_VARIABLE), env.get(PORT_VARIABLE, "443")
    token_file, ca_file = account_dir / "token", account_dir / "ca.crt"
    if not host or not token_file.is_file():
        return None
    if ":" in host:  # an IPv6 address, bracketed as client-go's net.JoinHostPort does
        host = f"[{host}]"
    return ApiServer(f"https://{host}:{port}", token_file.read_text().strip(), ca_file if ca_file.is_file() else None)


def taint_value(reason: str) -> str:
    """`reason` as a taint value: characters a label value may not hold become '-', cut to 63, alphanumeric at both
    ends; DEFAULT_REASON if nothing is left."""
    value = _NOT_IN_VALUE.sub("-", reason)[:_LABEL_VALUE_MAX].strip("-_.")
    return value or DEFAULT_REASON


def bad_node_taint(reason: str = DEFAULT_REASON) -> dict[str, str]:
    return {"key": BAD_NODE_TAINT_KEY, "value": taint_value(reason), "effect": BAD_NODE_TAINT_EFFECT}


def taints_with(taints: list[dict[str, Any]], taint: dict[str, str]) -> list[dict[str, Any]] | None:
    """The node's taints with `taint` added, replacing one of the same key and effect (the API refuses two: core/v1
    validation, validateNodeTaints); None when it is there already, value and all."""
    same = [t for t in taints if t.get("key") == taint["key"] and t.get("effect") == taint["effect"]]
    if any(t.get("value") == taint["value"] for t in same):
        return None
    return [*(t for t in taints if t not in same), taint]


def taint_patch(node: dict[str, Any], taint: dict[str, str]) -> dict[str, Any] | None:
    """The merge patch that adds `taint` to `node` (a Node as read) only if the node is unchanged since the read;
    None when nothing is to change."""
    taints = taints_with(node_taints(node), taint)
    return None if taints is None else taints_patch(node, taints)


def _api_error(error: urllib.error.HTTPError) -> str:
    """The API server's Status message, where it sent one."""
    try:
        message = json.loads(error.read()).get("message", "")
    except (ValueError, AttributeError, OSError):
        message = ""
    return f"HTTP {error.code}" + (f": {message}" if message else "")


def taint_node(api: ApiServer, node_name: str, reason: str = DEFAULT_REASON) -> bool:
    """Add the bad-node taint to `node_name`; True when it was added, False when it was there already. Raises
    TaintError."""
    taint = bad_node_taint(reason)
    try:
        return patch_node(api, node_name, lambda node: taint_patch(node, taint))
    except urllib.error.HTTPError as error:
        raise TaintError(f"{error.geturl()}: {_api_error(error)}") from None
    except NodeConflictError as error:
        raise TaintError(str(error)) from None
    except (urllib.error.URLError, OSError, ValueError, KeyError) as error:
        raise TaintError(f"{api.url}{node_path(node_name)}: {type(error).__name__}: {error}") from None


def taint_own_node(
    reason: str = DEFAULT_REASON, env: Mapping[str, str] = os.environ, api: ApiServer | None = None
) -> str:
    """Taint the node this pod runs on (NODE_NAME_VARIABLE) through `api` (default: the in-cluster API server); returns
    the line for the log, whatever happened. Never raises: the exit code the launcher chose stands either way."""
    node = env.get(NODE_NAME_VARIABLE)
    if not node:
        return f"node not tainted: {NODE_NAME_VARIABLE} is not set (the pod names its node through the downward API)"
    api = api or in_cluster(env)
    if api is None:
        return f"node {node} not tainted: no Kubernetes API server ({HOST_VARIABLE} or the service account's token)"
    shown = f"{BAD_NODE_TAINT_KEY}={taint_value(reason)}:{BAD_NODE_TAINT_EFFECT}"
    try:
        added = taint_node(api, node, reason)
    except TaintError as error:
        return f"node {node} not tainted with {shown}: {error}"
    except Exception as error:  # never fatal: the exit code must stand
        return f"node {node} not tainted with {shown}: {type(error).__name__}: {error}"
    if not added:
        return f"node {node} already carries {shown}"
    return f"node {node} tainted {shown}: no pod of the job is scheduled there until the taint is removed"
