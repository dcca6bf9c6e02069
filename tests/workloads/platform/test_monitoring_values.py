"""What the monitoring chart is told and what Prometheus scrapes: Prometheus' volume is the stack's own, and the
trainer is scraped where it serves its metrics, on the leader pod only."""

from __future__ import annotations

import dataclasses
from typing import Any

import kubernetes_validate
import pytest

from stack.config import KUBERNETES_VERSIONS, MonitoringConfig
from stack.files import load_stack_config, stack_names
from workloads.job.pytorchjob import pytorchjob_manifest
from workloads.job.spec import job_spec
from workloads.platform.monitoring import (
    PROMETHEUS_RESOURCE,
    kube_prometheus_stack_values,
    prometheus_storage_class,
    trainer_pod_monitor,
)
from workloads.platform.objects import prometheus_claim_objects

KUBERNETES_VERSION = f"{KUBERNETES_VERSIONS[-1]}.0"
# What the training operator adds to every pod it creates for a PyTorchJob (kubeflow/trainer v1.9.4,
# pkg/controller.v1/common/pod.go createNewPod and GenLabels; pkg/apis/kubeflow.org/v1/common_types.go): the job's
# name, the replica's type and index, and the leader role on the pod IsMasterRole picks (Worker 0 without a Master).
OPERATOR_NAME = "pytorchjob-controller"


def prometheus_spec(config: MonitoringConfig) -> dict[str, Any]:
    return kube_prometheus_stack_values(config)["prometheus"]["prometheusSpec"]


@pytest.mark.parametrize("stack", stack_names())
def test_prometheus_claim_is_the_stacks_on_its_own_cluster(stack: str) -> None:
    """The StatefulSet keeps the claim; `pulumi destroy` deletes it and then the volume (monitoring.py)."""
    config = load_stack_config(stack)
    spec = prometheus_spec(config.monitoring)
    if not config.monitoring.prometheus_storage_gib:
        assert "storageSpec" not in spec and "persistentVolumeClaimRetentionPolicy" not in spec
        assert prometheus_claim_objects(config) == []
        return
    # The key the chart's templates/prometheus/prometheus.yaml copies into the Prometheus resource (88.5.0).
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    template = spec["storageSpec"]["volumeClaimTemplate"]
    volume, claim = prometheus_claim_objects(config)
    # The StatefulSet controller takes an existing claim named "<template>-<statefulset>-<ordinal>".
    assert claim["metadata"]["name"] == f"{template['metadata']['name']}-prometheus-{PROMETHEUS_RESOURCE}-0"
    assert claim["spec"]["volumeName"] == volume["metadata"]["name"]
    assert (
        claim["spec"]["storageClassName"] == template["spec"]["storageClassName"] == volume["spec"]["storageClassName"]
    )
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    (term,) = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert term["matchExpressions"][0]["values"] == [config.gpu_availability_zone]


def test_the_chart_names_prometheus_after_the_release() -> None:
    """kube-prometheus-stack's fullname: "<release>-<chart>" cut to 26 characters, then "-prometheus"."""
    assert PROMETHEUS_RESOURCE == "monitoring-kube-prometheus-prometheus"


def test_on_an_existing_cluster_the_statefulsets_claim_goes_with_it_through_that_clusters_driver() -> None:
    config = load_stack_config("p5-2")
    existing = dataclasses.replace(config, cluster=dataclasses.replace(config.cluster, existing=True))
    values = kube_prometheus_stack_values(existing.monitoring, claim_from_stack=False)
    assert values["prometheus"]["prometheusSpec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Delete"
    assert prometheus_storage_class()["reclaimPolicy"] == "Delete"
    assert prometheus_claim_objects(existing) == []


def test_the_retention_policy_is_a_valid_statefulset_field() -> None:
    """The operator copies the value into the StatefulSet unchanged, so it must pass Kubernetes' own schema there."""
    policy = prometheus_spec(MonitoringConfig(prometheus_storage_gib=50))["persistentVolumeClaimRetentionPolicy"]
    labels = {"app": "prometheus"}
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "prometheus"},
        "spec": {
            "selector": {"matchLabels": labels},
            "serviceName": "prometheus",
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "p", "image": "p"}]}},
            "persistentVolumeClaimRetentionPolicy": policy,
        },
    }
    kubernetes_validate.validate(statefulset, KUBERNETES_VERSION, strict=True)
    assert set(policy.values()) <= {"Retain", "Delete"}  # the two values the API defines


def operator_pod_labels(manifest: dict[str, Any], index: int) -> dict[str, str]:
    """The labels of Worker `index`'s pod: the template's, and the operator's own."""
    labels = dict(manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]["labels"])
    labels |= {
        "training.kubeflow.org/operator-name": OPERATOR_NAME,
        "training.kubeflow.org/job-name": manifest["metadata"]["name"],
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": str(index),
    }
    if index == 0:
        labels["training.kubeflow.org/job-role"] = "master"
    return labels


def scraped(pod_labels: dict[str, str]) -> bool:
    return trainer_pod_monitor()["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


@pytest.mark.parametrize("stack", [s for s in stack_names() if load_stack_config(s).gpu_nodes.count > 1])
def test_only_the_pod_running_rank_0_is_scraped(stack: str) -> None:
    config = load_stack_config(stack)
    manifest = pytorchjob_manifest(job_spec(config, "registry/trainer:tag"))
    pods = [operator_pod_labels(manifest, index) for index in range(config.gpu_nodes.count)]
    assert [scraped(labels) for labels in pods] == [True] + [False] * (len(pods) - 1)


def test_worker_0_sorts_first_among_the_pods_host_names() -> None:
    """torch's rendezvous gives rank 0 to the node whose descriptor sorts first, and a descriptor starts with the
    host name, a pod's name: Worker 0's must come first at every size, "-worker-10" included."""
    config = load_stack_config("p5-16")
    name = job_spec(config, "registry/trainer:tag").name
    hosts = [f"{name}-worker-{index}" for index in range(config.gpu_nodes.count)]
    assert min(hosts) == hosts[0]
