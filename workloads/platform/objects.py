"""Every Kubernetes object the platform builds itself (not the charts' contents), from the stack's config.

`Platform` creates exactly these and `python -m workloads` prints them. None holds a credential: Grafana's admin
password is made in the cluster by its chart (workloads/platform/monitoring.py, GRAFANA_ADMIN_SECRET). Also the
commands a user runs next, which the stack exports.
"""

from __future__ import annotations

from typing import Any

from stack.config import StackConfig
from stack.job_api import JOB_KIND, SUCCEEDED_CONDITION
from stack.names import (
    COMPONENT_LABEL,
    PART_OF,
    PLATFORM_NAMESPACE,
    TRAINER_COMPONENT,
    TRAINING_NAMESPACE,
    job_name,
)
from trainer.base.s3.model_upload import download_command
from trainer.base.s3.run_layout import CHECKPOINT_DIRECTORY, MODEL_DIRECTORY, RECORD_DIRECTORY
from trainer.base.s3.uri import S3Uri
from workloads.job.api import Controller, job_api_for
from workloads.job.pod import UNCREATED_BUCKET
from workloads.platform.dashboards import dashboard_configmaps
from workloads.platform.etcd import etcd_objects
from workloads.platform.monitoring import (
    GRAFANA_ADMIN_PASSWORD_KEY,
    GRAFANA_ADMIN_SECRET,
    GRAFANA_ADMIN_USER,
    GRAFANA_SERVICE,
    prometheus_storage_class,
    prometheus_volume_objects,
    stack_prometheus_volume,
    trainer_pod_monitor,
)
from workloads.platform.node_tools import node_tools_daemonset
from workloads.platform.placement import platform_node_selector
from workloads.platform.trainer_v2 import trainer_v2_namespace

VOLUME_ID_PLACEHOLDER = "<created by pulumi up: an EBS volume in the GPU nodes' AZ>"


def leader_selector(config: StackConfig) -> str:
    """The pod of global rank 0, as a kubectl selector: the PyTorchJob's Worker 0 or the TrainJob's node 0."""
    return ",".join(f"{key}={value}" for key, value in job_api_for(config.job.api).leader_labels().items())


def platform_namespace() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PLATFORM_NAMESPACE, "labels": dict(PART_OF)}}


def storage_objects(config: StackConfig) -> list[dict[str, Any]]:
    monitoring = config.monitoring
    return [prometheus_storage_class()] if monitoring.enabled and monitoring.prometheus_storage_gib else []


def prometheus_claim_objects(config: StackConfig, volume_id: Any = VOLUME_ID_PLACEHOLDER) -> list[dict[str, Any]]:
    """Prometheus' PersistentVolume and claim on the stack's own EBS volume `volume_id`, in the GPU nodes' AZ."""
    if not stack_prometheus_volume(config):
        return []
    gib = config.monitoring.prometheus_storage_gib
    return prometheus_volume_objects(gib, volume_id, config.gpu_availability_zone)


def grafana_objects(config: StackConfig) -> list[dict[str, Any]]:
    """The project's dashboards, for Grafana's sidecar; its admin Secret is the chart's own."""
    monitoring = config.monitoring
    if not (monitoring.enabled and monitoring.grafana):
        return []
    return dashboard_configmaps()


def scrape_objects(config: StackConfig) -> list[dict[str, Any]]:
    """Custom resources of the prometheus-operator: created only after kube-prometheus-stack brings the CRDs."""
    return [trainer_pod_monitor(api=config.job.api)] if config.monitoring.enabled else []


def node_tools_objects(config: StackConfig) -> list[dict[str, Any]]:
    return [node_tools_daemonset()] if config.monitoring.node_tools else []


def rendezvous_objects(config: StackConfig) -> list[dict[str, Any]]:
    """etcd for the job's rendezvous where its API needs it: the PyTorchJob's; a TrainJob's torchrun meets on node 0."""
    if not job_api_for(config.job.api).platform.etcd:
        return []
    return etcd_objects(config.stack, node_selector=platform_node_selector(config))


def trainer_v2_objects(config: StackConfig) -> list[dict[str, Any]]:
    """Trainer v2's namespace, where the job's API runs under it (the chart itself goes in as a Helm release)."""
    return [trainer_v2_namespace()] if job_api_for(config.job.api).platform.controller is Controller.TRAINER_V2 else []


def platform_objects(config: StackConfig) -> list[dict[str, Any]]:
    return [
        platform_namespace(),
        *rendezvous_objects(config),
        *trainer_v2_objects(config),
        *storage_objects(config),
        *prometheus_claim_objects(config),
        *grafana_objects(config),
        *scrape_objects(config),
        *node_tools_objects(config),
    ]


def artifacts_commands(run_uri: str) -> dict[str, str]:
    """The run's artifacts in S3 (`run_uri`, s3://bucket/prefix/stack/run-n/, the stack's artifactsUri; "" before the
    bucket has its name, for the keys alone): what is there, and the final model downloaded in Hugging Face format
    once its export is complete (trainer/base/s3/model_upload.py download_command), and the run's record: metrics,
    summary
    and chart (trainer/record/archive.py)."""
    run = S3Uri.parse(run_uri, "artifactsUri") if run_uri else S3Uri(UNCREATED_BUCKET)
    model, record = run.join(MODEL_DIRECTORY), run.join(RECORD_DIRECTORY)
    return {
        "artifacts": f"aws s3 ls {run_uri} && aws s3 ls {run_uri}{CHECKPOINT_DIRECTORY}/",
        "downloadModel": download_command(S3Uri(model.bucket, model.prefix)),
        "downloadRecord": f"aws s3 cp --recursive {S3Uri(record.bucket, record.prefix)} ./record",
    }


def wait_for_job(config: StackConfig) -> str:
    """Returns once the job has succeeded: the model is in S3 only then (the trainer's export ends the run)."""
    api = config.job.api
    return (
        f"kubectl -n {TRAINING_NAMESPACE} wait --for=condition={SUCCEEDED_CONDITION[api]} "
        f"{JOB_KIND[api].lower()}/{job_name(config.stack)} --timeout=24h"
    )


def next_commands(config: StackConfig) -> dict[str, str]:
    """What to type after `pulumi up` (with the kubeconfig from `aws eks update-kubeconfig`)."""
    commands = {
        "kubeconfig": f"aws eks update-kubeconfig --region {config.region} --name {config.cluster_name}",
        "trainingPods": f"kubectl -n {TRAINING_NAMESPACE} get pods -l {COMPONENT_LABEL}={TRAINER_COMPONENT} -o wide",
        "leaderLog": f"kubectl -n {TRAINING_NAMESPACE} logs -f -l {leader_selector(config)} --tail=200",
        "waitForJob": wait_for_job(config),
    }
    if config.monitoring.enabled and config.monitoring.grafana:
        commands["grafana"] = (
            f"kubectl -n {PLATFORM_NAMESPACE} port-forward svc/{GRAFANA_SERVICE} 3000:80"
            f"  # then open http://localhost:3000 as {GRAFANA_ADMIN_USER}"
        )
        # The chart's Secret, made in the cluster at the first install; the stack never sees the password.
        commands["grafanaPassword"] = (
            f"kubectl -n {PLATFORM_NAMESPACE} get secret {GRAFANA_ADMIN_SECRET} "
            f"-o jsonpath='{{.data.{GRAFANA_ADMIN_PASSWORD_KEY}}}' | base64 -d"
        )
    return commands
