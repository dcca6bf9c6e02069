"""No public load balancer or public endpoint for Grafana, Prometheus or etcd.

Grafana's and Prometheus' APIs read every metric (and Grafana's admin login guards dashboards with data source
credentials); etcd here runs without client TLS and holds the rendezvous of the running job, so anyone reaching
it can stop training. Inside the cluster, `kubectl port-forward` is the way in. An internal load balancer (reachable
only from the VPC) is allowed: it is how a team behind a VPN would reach Grafana.

Where these can be exposed in this project and in most charts: a Service of type LoadBalancer, an Ingress, and the
`service` / `ingress` values of a Helm chart (kube-prometheus-stack's `grafana.service.type` among them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from policy.props import dotted, get, is_unknown, walk

SERVICE = "kubernetes:core/v1:Service"
INGRESS_TYPES = ("kubernetes:networking.k8s.io/v1:Ingress", "kubernetes:networking.k8s.io/v1beta1:Ingress")
HELM_TYPES = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart", "kubernetes:helm.sh/v3:Chart")
# Monitoring and rendezvous components, matched in names, labels, selectors and chart value paths.
GUARDED = re.compile(r"grafana|prometheus|etcd", re.IGNORECASE)
# What makes an AWS load balancer internal: the AWS Load Balancer Controller's scheme annotation, or the legacy
# in-tree cloud provider's flag. Without either, a LoadBalancer Service gets an internet-facing one.
INTERNAL_SERVICE_ANNOTATIONS = {
    "service.beta.kubernetes.io/aws-load-balancer-scheme": "internal",
    "service.beta.kubernetes.io/aws-load-balancer-internal": "true",
}
INGRESS_SCHEME_ANNOTATION = "alb.ingress.kubernetes.io/scheme"


def is_internal(annotations: Any) -> bool:
    if not isinstance(annotations, Mapping):
        return False
    return any(str(annotations.get(key, "")).lower() == value for key, value in INTERNAL_SERVICE_ANNOTATIONS.items())


def _guarded_names(obj: Mapping[str, Any]) -> set[str]:
    """Which guarded components a Kubernetes object is about, from its name, labels and (Services) selector."""
    texts = [get(obj, "metadata", "name")]
    for section in (get(obj, "metadata", "labels"), get(obj, "spec", "selector")):
        if isinstance(section, Mapping):
            texts += list(section.values())
    return {m.group(0).lower() for t in texts if isinstance(t, str) for m in GUARDED.finditer(t)}


def service_violations(props: Mapping[str, Any]) -> list[str]:
    guarded = _guarded_names(props)
    kind = get(props, "spec", "type")
    if not guarded or kind != "LoadBalancer" or is_internal(get(props, "metadata", "annotations")):
        return []
    name = get(props, "metadata", "name")
    return [
        f"Service {name!r} ({', '.join(sorted(guarded))}) is an internet-facing LoadBalancer; use ClusterIP and "
        "`kubectl port-forward`, or an internal load balancer "
        "(annotation service.beta.kubernetes.io/aws-load-balancer-scheme: internal)"
    ]


def ingress_violations(props: Mapping[str, Any]) -> list[str]:
    """An Ingress routing to a guarded Service is public unless it says it is internal: the AWS Load Balancer
    Controller's default scheme is internal, but other controllers' load balancers are usually internet-facing, so
    only the explicit annotation counts."""
    backends = {
        value
        for path, value in walk(get(props, "spec"))
        if path[-2:] == ("service", "name") and isinstance(value, str) and GUARDED.search(value)
    }
    scheme = get(props, "metadata", "annotations", INGRESS_SCHEME_ANNOTATION)
    if not backends or scheme == "internal" or is_unknown(scheme):
        return []
    name = get(props, "metadata", "name")
    return [
        f"Ingress {name!r} exposes {', '.join(sorted(backends))}; remove it (port-forward instead) or make it "
        f"internal ({INGRESS_SCHEME_ANNOTATION}: internal)"
    ]


def helm_values_violations(props: Mapping[str, Any]) -> list[str]:
    """`service.type: LoadBalancer` or `ingress.enabled: true` in a chart's values, where the chart or the values
    path names a guarded component (kube-prometheus-stack's grafana / prometheus sections)."""
    chart = get(props, "chart")
    chart_guarded = isinstance(chart, str) and GUARDED.search(chart) is not None
    problems: list[str] = []
    for path, value in walk(get(props, "values")):
        if not isinstance(value, Mapping) or not path or path[-1] not in ("service", "ingress"):
            continue
        if not (chart_guarded or any(isinstance(p, str) and GUARDED.search(p) for p in path)):
            continue
        where = f"values.{dotted(path)}"
        if (
            path[-1] == "service"
            and get(value, "type") == "LoadBalancer"
            and not is_internal(get(value, "annotations"))
        ):
            problems.append(
                f"chart {chart!r}: {where}.type is LoadBalancer (internet-facing); use ClusterIP and "
                "`kubectl port-forward`, or annotate it internal"
            )
        if path[-1] == "ingress" and get(value, "enabled") is True:
            scheme = get(value, "annotations", INGRESS_SCHEME_ANNOTATION)
            if scheme != "internal" and not is_unknown(scheme):
                problems.append(
                    f"chart {chart!r}: {where}.enabled is true; remove the Ingress or make it "
                    f"internal ({INGRESS_SCHEME_ANNOTATION}: internal)"
                )
    return problems


def public_endpoint_violations(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    if resource_type == SERVICE:
        return service_violations(props)
    if resource_type in INGRESS_TYPES:
        return ingress_violations(props)
    if resource_type in HELM_TYPES:
        return helm_values_violations(props)
    return []
