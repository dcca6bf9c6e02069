"""No internet-facing load balancer or Ingress for Grafana, Prometheus or etcd."""

from __future__ import annotations

import dataclasses

import pytest

from policy.exposure import public_endpoint_violations
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
