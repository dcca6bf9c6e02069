"""No internet-facing load balancer or Ingress for Grafana, Prometheus or etcd; what decides it, unknown during a
preview, is "not checked"."""

from __future__ import annotations

import dataclasses

import pytest

from policy.exposure import INGRESS_SCHEME_ANNOTATION, public_endpoint_violations
from policy.props import NOT_CHECKED, UNKNOWN
from stack.config import MonitoringConfig
from workloads.platform.etcd import etcd_service
from workloads.platform.monitoring import kube_prometheus_stack_values

SERVICE = "kubernetes:core/v1:Service"
INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
RELEASE = "kubernetes:helm.sh/v3:Release"


def _release(values: dict, chart: str = "kube-prometheus-stack") -> dict:
    return {"chart": chart, "namespace": "fsdp-system", "values": values}


def _load_balancer(service: dict, annotations: dict | None = None) -> dict:
    service["spec"]["type"] = "LoadBalancer"
    if annotations:
        service["metadata"]["annotations"] = annotations
    return service


def test_the_platforms_etcd_service_passes() -> None:
    assert public_endpoint_violations(SERVICE, etcd_service()) == []


def test_etcd_behind_a_public_load_balancer_fails() -> None:
    (problem,) = public_endpoint_violations(SERVICE, _load_balancer(etcd_service()))
    assert "'etcd'" in problem and "LoadBalancer" in problem


@pytest.mark.parametrize(
    "annotations",
    [
        {"service.beta.kubernetes.io/aws-load-balancer-scheme": "internal"},
        {"service.beta.kubernetes.io/aws-load-balancer-internal": "true"},
    ],
)
def test_an_internal_load_balancer_passes(annotations: dict) -> None:
    assert public_endpoint_violations(SERVICE, _load_balancer(etcd_service(), annotations)) == []


def test_other_services_may_have_public_load_balancers() -> None:
    service = {"metadata": {"name": "inference"}, "spec": {"type": "LoadBalancer", "selector": {"app": "api"}}}
    assert public_endpoint_violations(SERVICE, service) == []


def test_a_service_selecting_grafana_pods_counts_as_grafana() -> None:
    service = {
        "metadata": {"name": "dashboards"},
        "spec": {"type": "LoadBalancer", "selector": {"app.kubernetes.io/name": "grafana"}},
    }
    assert "grafana" in public_endpoint_violations(SERVICE, service)[0]


def test_the_stacks_monitoring_values_pass() -> None:
    assert public_endpoint_violations(RELEASE, _release(kube_prometheus_stack_values(MonitoringConfig()))) == []


def test_grafana_load_balancer_in_the_chart_values_fails() -> None:
    config = dataclasses.replace(MonitoringConfig(), grafana_load_balancer=True)
    (problem,) = public_endpoint_violations(RELEASE, _release(kube_prometheus_stack_values(config)))
    assert "values.grafana.service.type" in problem


def test_a_prometheus_ingress_in_chart_values_fails() -> None:
    values = {"prometheus": {"ingress": {"enabled": True, "hosts": ["prom.example.com"]}}}
    (problem,) = public_endpoint_violations(RELEASE, _release(values))
    assert "values.prometheus.ingress.enabled" in problem


def test_an_internal_ingress_in_chart_values_passes() -> None:
    values = {
        "grafana": {"ingress": {"enabled": True, "annotations": {"alb.ingress.kubernetes.io/scheme": "internal"}}}
    }
    assert public_endpoint_violations(RELEASE, _release(values)) == []


def test_a_standalone_etcd_chart_with_a_load_balancer_fails() -> None:
    assert public_endpoint_violations(RELEASE, _release({"service": {"type": "LoadBalancer"}}, chart="etcd"))


def test_other_charts_services_are_not_this_policys_business() -> None:
    values = {"service": {"type": "LoadBalancer"}}
    assert public_endpoint_violations(RELEASE, _release(values, chart="nvidia-device-plugin")) == []


def _ingress(annotations: dict | None = None) -> dict:
    backend = {"service": {"name": "grafana", "port": {"number": 80}}}
    return {
        "metadata": {"name": "grafana", "annotations": annotations or {}},
        "spec": {"rules": [{"http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]}}]},
    }


def test_an_ingress_to_grafana_fails_unless_internal() -> None:
    assert "grafana" in public_endpoint_violations(INGRESS, _ingress())[0]
    assert public_endpoint_violations(INGRESS, _ingress({"alb.ingress.kubernetes.io/scheme": "internal"})) == []


def _not_checked(resource_type: str, props: dict) -> str:
    (problem,) = public_endpoint_violations(resource_type, props)
    assert problem.startswith(NOT_CHECKED), problem
    return problem


def test_a_guarded_service_of_unknown_type_is_not_checked() -> None:
    service = etcd_service()
    service["spec"]["type"] = UNKNOWN
    assert "'etcd'" in _not_checked(SERVICE, service)


def test_a_guarded_load_balancer_with_unknown_annotations_is_not_checked() -> None:
    assert _not_checked(
        SERVICE, _load_balancer(etcd_service(), {"service.beta.kubernetes.io/aws-load-balancer-scheme": UNKNOWN})
    )
    service = _load_balancer(etcd_service())
    service["metadata"]["annotations"] = UNKNOWN
    assert _not_checked(SERVICE, service)


def test_a_load_balancer_whose_component_is_unknown_is_not_checked() -> None:
    service = {"metadata": {"name": UNKNOWN}, "spec": {"type": "LoadBalancer", "selector": {"app": "api"}}}
    assert "name, labels or selector" in _not_checked(SERVICE, service)
    service = {"metadata": {"name": "api"}, "spec": {"type": "LoadBalancer", "selector": UNKNOWN}}
    assert _not_checked(SERVICE, service)


def test_a_cluster_ip_service_needs_nothing_else_known() -> None:
    service = {"metadata": {"name": UNKNOWN, "annotations": UNKNOWN}, "spec": {"selector": UNKNOWN}}
    assert public_endpoint_violations(SERVICE, service) == []


def test_an_ingress_with_unknown_scheme_or_backends_is_not_checked() -> None:
    assert _not_checked(INGRESS, _ingress({INGRESS_SCHEME_ANNOTATION: UNKNOWN}))
    ingress = _ingress()
    ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"] = UNKNOWN
    assert "backends" in _not_checked(INGRESS, ingress)


def test_an_ingress_to_other_services_needs_no_scheme() -> None:
    ingress = _ingress({INGRESS_SCHEME_ANNOTATION: UNKNOWN})
    ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"] = "api"
    assert public_endpoint_violations(INGRESS, ingress) == []


@pytest.mark.parametrize(
    "values,where",
    [
        (UNKNOWN, "values is unknown"),
        ({"grafana": UNKNOWN}, "values.grafana is unknown"),
        ({"grafana": {"service": UNKNOWN}}, "values.grafana.service is unknown"),
        ({"grafana": {"service": {"type": UNKNOWN}}}, "values.grafana.service"),
        ({"grafana": {"service": {"type": "LoadBalancer", "annotations": UNKNOWN}}}, "values.grafana.service"),
        ({"prometheus": {"ingress": {"enabled": UNKNOWN}}}, "values.prometheus.ingress"),
        ({"prometheus": {"ingress": {"enabled": True, "annotations": UNKNOWN}}}, "values.prometheus.ingress"),
    ],
)
def test_chart_values_unknown_where_an_endpoint_could_be_are_not_checked(values: dict, where: str) -> None:
    assert where in _not_checked(RELEASE, _release(values))


def test_an_unknown_chart_name_counts_as_guarded() -> None:
    assert _not_checked(RELEASE, _release({"service": {"type": UNKNOWN}}, chart=UNKNOWN))


def test_unknown_chart_values_away_from_any_endpoint_are_no_concern() -> None:
    values = {"grafana": {"persistence": UNKNOWN, "service": {"type": "ClusterIP", "port": UNKNOWN}}}
    assert public_endpoint_violations(RELEASE, _release(values)) == []
    assert public_endpoint_violations(RELEASE, _release({"image": UNKNOWN}, chart="nvidia-device-plugin")) == []
