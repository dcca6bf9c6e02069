"""Turn a builder's plain Kubernetes object (a dict) into the matching pulumi_kubernetes resource.

Typed classes for the kinds the project builds, so `pulumi preview` shows them as what they are; any other kind
(a custom resource such as a PodMonitor) becomes an apiextensions.CustomResource.
"""

from __future__ import annotations

import re
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

_CLASSES: dict[tuple[str, str], Any] = {
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "Service"): k8s.core.v1.Service,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "Secret"): k8s.core.v1.Secret,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("apps/v1", "DaemonSet"): k8s.apps.v1.DaemonSet,
    ("networking.k8s.io/v1", "NetworkPolicy"): k8s.networking.v1.NetworkPolicy,
    ("storage.k8s.io/v1", "StorageClass"): k8s.storage.v1.StorageClass,
}


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def resource_name(obj: dict[str, Any], prefix: str = "") -> str:
    """A Pulumi name unique in the stack: the owner's prefix, kind, namespace (if any) and name."""
    meta = obj["metadata"]
    return "-".join(part for part in (prefix, obj["kind"].lower(), meta.get("namespace"), meta["name"]) if part)


def kubernetes_resource(obj: dict[str, Any], opts: pulumi.ResourceOptions, prefix: str = "") -> pulumi.CustomResource:
    # Objects carry fixed names (a Service's DNS name is a contract), so a replacement must delete first or the
    # new object would collide with the old one.
    opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(delete_before_replace=True))
    fields = {key: value for key, value in obj.items() if key not in ("apiVersion", "kind")}
    cls = _CLASSES.get((obj["apiVersion"], obj["kind"]))
    if cls is None:
        return k8s.apiextensions.CustomResource(
            resource_name(obj, prefix), api_version=obj["apiVersion"], kind=obj["kind"], opts=opts, **fields
        )
    # Top-level fields are keyword arguments (snake_case); nested dicts pass through in Kubernetes' camelCase.
    return cls(resource_name(obj, prefix), opts=opts, **{_snake(key): value for key, value in fields.items()})
