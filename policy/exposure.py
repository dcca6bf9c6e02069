"""No public load balancer or public endpoint for Grafana, Prometheus or etcd.

Grafana's and Prometheus' APIs read every metric (and Grafana's admin login guards dashboards with data source
credentials); etcd here runs without client TLS and holds the rendezvous of the running job, so anyone reaching
it can stop training. Inside the cluster, `kubectl port-forward` is the way in. An internal load balancer (reachable
only from the VPC) is allowed: it is how a team behind a VPN would reach Grafana.

Where these can be exposed in this project and in most charts: a Service of type LoadBalancer, an Ingress, and the
`service` / `ingress` values of a Helm chart (kube-prometheus-stack's `grafana.service.type` among them).

The check fails closed: where a value it needs is unknown during the preview (whether the object is about a guarded
component, its type, its scheme annotation, a chart's values) it says "not checked" rather than pass.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from policy.props import dotted, get, has_unknown, is_unknown, not_checked, walk

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


def _guarded_texts(obj: Mapping[str, Any]) -> list[Any]:
    """What names a Kubernetes object's component: its name, labels and (Services) selector."""
    texts = [get(obj, "metadata", "name")]
    for section in (get(obj, "metadata", "labels"), get(obj, "spec", "selector")):
        texts += list(section.values()) if isinstance(section, Mapping) else [section]
    return texts


def _guarded_names(obj: Mapping[str, Any]) -> set[str]:
    """Which guarded components a Kubernetes object is about, from its name, labels and (Services) selector."""
    return {m.group(0).lower() for t in _guarded_texts(obj) if isinstance(t, str) for m in GUARDED.finditer(t)}


def service_violations(props: Mapping[str, Any]) -> list[str]:
    guarded = _guarded_names(props)
    kind = get(props, "spec", "type")
    name = get(props, "metadata", "name")
    if not is_unknown(kind) and kind != "LoadBalancer":
        return []
    if not guarded and any(is_unknown(t) for t in _guarded_texts(props)):
        return [
            not_checked(
                f"Service {name!r} may be a load balancer and its name, labels or selector are unknown during this "
                "preview, so whether it exposes Grafana, Prometheus or etcd is unknown",
                "give it a literal name and selector",
            )
        ]
    if not guarded:
        return []
    annotations = get(props, "metadata", "annotations")
    if is_unknown(kind) or (not is_internal(annotations) and has_unknown(annotations)):
        return [
            not_checked(
                f"Service {name!r} ({', '.join(sorted(guarded))}): its spec.type or its annotations are unknown during "
                "this preview",
                "give spec.type (and any load balancer scheme annotation) literal values",
            )
        ]
    if is_internal(annotations):
        return []
    return [
        f"Service {name!r} ({', '.join(sorted(guarded))}) is an internet-facing LoadBalancer; use ClusterIP and "
        "`kubectl port-forward`, or an internal load balancer "
        "(annotation service.beta.kubernetes.io/aws-load-balancer-scheme: internal)"
    ]


def ingress_violations(props: Mapping[str, Any]) -> list[str]:
    """An Ingress routing to a guarded Service is public unless it says it is internal: the AWS Load Balancer
    Controller's default scheme is internal, but other controllers' load balancers are usually internet-facing, so
    only the explicit annotation counts."""
    spec = get(props, "spec")
    backends = {
        value
        for path, value in walk(spec)
        if path[-2:] == ("service", "name") and isinstance(value, str) and GUARDED.search(value)
    }
    scheme = get(props, "metadata", "annotations", INGRESS_SCHEME_ANNOTATION)
    name = get(props, "metadata", "name")
    if scheme == "internal" or (not backends and not has_unknown(spec)):
        return []
    if is_unknown(scheme) or not backends:
        return [
            not_checked(
                f"Ingress {name!r}: its backends or its {INGRESS_SCHEME_ANNOTATION} annotation are unknown during "
                "this preview, so whether it exposes Grafana, Prometheus or etcd is unknown",
                "give its backend service names and scheme annotation literal values",
            )
        ]
    return [
        f"Ingress {name!r} exposes {', '.join(sorted(backends))}; remove it (port-forward instead) or make it "
        f"internal ({INGRESS_SCHEME_ANNOTATION}: internal)"
    ]


def helm_values_violations(props: Mapping[str, Any]) -> list[str]:
    """`service.type: LoadBalancer` or `ingress.enabled: true` in a chart's values, where the chart or the values
    path names a guarded component (kube-prometheus-stack's grafana / prometheus sections). An unknown chart name
    counts as guarded; an unknown value that is, or holds, a guarded section or a `service` / `ingress` section is
    "not checked"."""
    chart = get(props, "chart")
    chart_guarded = is_unknown(chart) or (isinstance(chart, str) and GUARDED.search(chart) is not None)
    problems: list[str] = []
    for path, value in walk(get(props, "values")):
        guarded = chart_guarded or any(isinstance(p, str) and GUARDED.search(p) for p in path)
        where = f"values.{dotted(path)}" if path else "values"
        if is_unknown(value) and _may_hold_an_endpoint(path, guarded):
            problems.append(
                not_checked(
                    f"chart {chart!r}: {where} is unknown during this preview, so whether it opens a load balancer "
                    "or an Ingress for Grafana, Prometheus or etcd is unknown",
                    "give the chart's service and ingress values literal values",
                )
            )
        if not isinstance(value, Mapping) or not path or path[-1] not in ("service", "ingress") or not guarded:
            continue
        problems += _section_problems(chart, where, path[-1], value)
    return problems


def _may_hold_an_endpoint(path: tuple[str | int, ...], guarded: bool) -> bool:
    """Whether an unknown value at `path` of a chart's values could be, or hold, a guarded service or ingress: all the
    values, a section named after a guarded component, or a guarded `service` / `ingress` section as a whole (an
    unknown setting inside a known section is judged by `_section_problems`)."""
    if not path:
        return True
    last = path[-1]
    if not guarded or not isinstance(last, str):
        return False
    return GUARDED.search(last) is not None or last in ("service", "ingress")


def _section_problems(chart: Any, where: str, kind: Any, section: Mapping[str, Any]) -> list[str]:
    """One guarded `service` or `ingress` section of a chart's values."""
    unknown = not_checked(
        f"chart {chart!r}: a setting of {where} is unknown during this preview",
        "give its type, enabled and annotations literal values",
    )
    if kind == "service":
        kind_value, annotations = get(section, "type"), get(section, "annotations")
        if is_unknown(kind_value):
            return [unknown]
        if kind_value != "LoadBalancer" or is_internal(annotations):
            return []
        if has_unknown(annotations):
            return [unknown]
        return [
            f"chart {chart!r}: {where}.type is LoadBalancer (internet-facing); use ClusterIP and "
            "`kubectl port-forward`, or annotate it internal"
        ]
    enabled, scheme = get(section, "enabled"), get(section, "annotations", INGRESS_SCHEME_ANNOTATION)
    if is_unknown(enabled) or (enabled is True and is_unknown(scheme)):
        return [unknown]
    if enabled is not True or scheme == "internal":
        return []
    return [
        f"chart {chart!r}: {where}.enabled is true; remove the Ingress or make it "
        f"internal ({INGRESS_SCHEME_ANNOTATION}: internal)"
    ]


def public_endpoint_violations(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    if resource_type == SERVICE:
        return service_violations(props)
    if resource_type in INGRESS_TYPES:
        return ingress_violations(props)
    if resource_type in HELM_TYPES:
        return helm_values_violations(props)
    return []
