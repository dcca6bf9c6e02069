"""Monitoring: the Kubernetes objects the project builds itself (the trainer's PodMonitor, Prometheus' StorageClass
and volume) and the Helm values of kube-prometheus-stack and the DCGM exporter.

Grafana's admin password is made in the cluster, never by Pulumi, so no stack state holds it: the values set neither
`adminPassword` nor `admin.existingSecret`, and the Grafana chart then renders its own Secret with a random password
that it keeps across upgrades (GRAFANA_ADMIN_SECRET says where and how).

Prometheus is told to select every ServiceMonitor and PodMonitor in the cluster, not only those carrying the
release's label, so the DCGM exporter's chart and the project's own PodMonitor need no extra labels.
"""

from __future__ import annotations

from typing import Any

from stack.config import MonitoringConfig, StackConfig
from stack.job_api import DEFAULT_JOB_API, leader_labels
from stack.names import (
    GPU_NODE_GROUP,
    GPU_TAINT_EFFECT,
    GPU_TAINT_KEY,
    NODE_GROUP_LABEL,
    PART_OF,
    PLATFORM_NAMESPACE,
    TRAINER_METRICS_PORT_NAME,
    TRAINING_NAMESPACE,
)
from workloads.platform.dashboards import DASHBOARD_LABEL, DASHBOARD_LABEL_VALUE
from workloads.platform.placement import SYSTEM_NODES

GPU_NODES = {NODE_GROUP_LABEL: GPU_NODE_GROUP}
GPU_TOLERATION = {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": GPU_TAINT_EFFECT}

# Release and object names the next-step commands and the docs refer to.
MONITORING_RELEASE = "monitoring"
GRAFANA_SERVICE = "grafana"  # the Grafana subchart's fullnameOverride: Service and Deployment are named "grafana"
# The Secret Grafana's chart makes for the admin login when the values give neither adminPassword nor
# admin.existingSecret, named by the chart's fullname, here GRAFANA_SERVICE, in the release's namespace. Its
# admin-password is the password the Secret already in the cluster holds (Helm's `lookup`), else 40 random letters
# and digits: generated at the first install, kept by every upgrade. Read in grafana-community/helm-charts
# charts/grafana 12.11.0, the version kube-prometheus-stack 88.5.0 depends on (its Chart.yaml): templates/secret.yaml,
# _config.tpl "grafana.secretsData", _helpers.tpl "grafana.password". kube-prometheus-stack itself sets no
# adminPassword since #5679 (values.yaml, "adminUser: admin", "# adminPassword: strongpassword").
# The pulumi-kubernetes Release keeps the release's values (ours: no password), the names of the rendered objects and
# the release's status in the state, not the rendered manifest (provider/pkg/provider/helm_release.go, the Release
# type and setReleaseAttributes; which version was read: docs/versions.md), so the rendered Secret stays in the
# cluster. The lookup sees the cluster because the provider installs and upgrades for real (helmCreate sets ClientOnly
# false; helmUpdate runs a plain upgrade).
GRAFANA_ADMIN_SECRET = GRAFANA_SERVICE
GRAFANA_ADMIN_PASSWORD_KEY = "admin-password"
GRAFANA_ADMIN_USER = "admin"  # the chart's adminUser default, which kube-prometheus-stack keeps
PROMETHEUS_STORAGE_CLASS = "fsdp-eks-gp3"
# The Prometheus resource kube-prometheus-stack makes: its chart names it "<fullname>-prometheus", the fullname being
# "<release>-<chart>" cut to 26 characters (templates/_helpers.tpl, kube-prometheus-stack.fullname and
# kube-prometheus-stack.prometheus.crname), here "monitoring-kube-prometheus".
PROMETHEUS_RESOURCE = f"{MONITORING_RELEASE}-kube-prometheus-stack"[:26].rstrip("-") + "-prometheus"
# The prometheus-operator names the StatefulSet "prometheus-<resource>" and its claim template after storageSpec's
# volumeClaimTemplate.metadata.name (pkg/prometheus/server/statefulset.go); the StatefulSet controller names the one
# replica's claim "<template>-<statefulset>-0" and uses a claim of that name when one exists instead of creating it.
PROMETHEUS_CLAIM_TEMPLATE = "data"
PROMETHEUS_CLAIM = f"{PROMETHEUS_CLAIM_TEMPLATE}-prometheus-{PROMETHEUS_RESOURCE}-0"
PROMETHEUS_VOLUME = "fsdp-eks-prometheus"
EBS_CSI_DRIVER = "ebs.csi.aws.com"
ZONE_LABEL = "topology.kubernetes.io/zone"  # the well-known label every EKS node carries
TRAINER_POD_MONITOR = "fsdp-eks-trainer"
SCRAPE_INTERVAL = "15s"


def prometheus_storage_class() -> dict[str, Any]:
    """gp3 through the EBS CSI driver (an EKS add-on of the cluster). WaitForFirstConsumer creates the volume in
    the AZ where the scheduler put Prometheus, so a two-AZ system node group works."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": PROMETHEUS_STORAGE_CLASS, "labels": dict(PART_OF)},
        "provisioner": "ebs.csi.aws.com",
        "parameters": {"type": "gp3", "encrypted": "true"},
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowVolumeExpansion": True,
    }


def trainer_pod_monitor(namespace: str = PLATFORM_NAMESPACE, api: str = DEFAULT_JOB_API) -> dict[str, Any]:
    """Scrape the leader pod, Worker 0, on its named metrics port: only rank 0 serves metrics
    (trainer/base/metrics/figures.py), and rank 0 runs on Worker 0 whenever Worker 0 is in the group. torch's dynamic
    rendezvous ranks the nodes in the sorted order of their descriptors, host name first
    (torch/distributed/elastic/rendezvous/ dynamic_rendezvous.py, _mark_rendezvous_complete); a pod's host name is its
    name, as the operator sets no other, and "<job>-worker-0" sorts before every other worker's. Scraping every pod
    would show all the others as down targets. While Worker 0 is lost the group runs without it and its metrics pause
    until the operator has created it again. A TrainJob's static rendezvous gives node 0 global rank 0 (its node rank is
    the Job's completion index, stack/names.py), and a lost node restarts every pod, node 0 among them."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {"name": TRAINER_POD_MONITOR, "namespace": namespace, "labels": dict(PART_OF)},
        "spec": {
            "selector": {"matchLabels": leader_labels(api)},
            "namespaceSelector": {"matchNames": [TRAINING_NAMESPACE]},
            "podMetricsEndpoints": [
                {
                    "port": TRAINER_METRICS_PORT_NAME,
                    "path": "/metrics",
                    "interval": SCRAPE_INTERVAL,
                    # The node a series came from, to line training figures up with the GPU dashboard.
                    "relabelings": [
                        {
                            "sourceLabels": ["__meta_kubernetes_pod_node_name"],
                            "targetLabel": "node",
                            "action": "replace",
                        }
                    ],
                }
            ],
        },
    }


def stack_prometheus_volume(config: StackConfig) -> bool:
    """Whether the stack creates Prometheus' volume itself: on its own cluster, whose EBS CSI driver and nodes the
    same `pulumi destroy` deletes (prometheus_volume_objects says why). On an existing cluster the
    StatefulSet's claim is provisioned by that cluster's driver, which outlives the stack."""
    monitoring = config.monitoring
    return monitoring.enabled and monitoring.prometheus_storage_gib > 0 and not config.cluster.existing


def prometheus_volume_objects(size_gib: int, volume_id: Any, zone: str) -> list[dict[str, Any]]:
    """The volume the stack creates for Prometheus (an EBS volume in `zone`), as a PersistentVolume and the claim the
    Prometheus StatefulSet takes by its name. Statically provisioned, so that `pulumi destroy` waits for the whole
    cleanup: it deletes the claim (gone once Prometheus' pod is), then the PersistentVolume, which the CSI attacher
    holds with its finalizer until the volume is detached (kubernetes-csi/external-attacher, csi_handler.go
    addPVFinalizer), then the EBS volume itself, all before the EBS CSI driver and the nodes go. A dynamically
    provisioned volume is deleted by the driver after the claim is gone, when nothing waits for it any more. Retain:
    Kubernetes never deletes the volume; the stack does."""
    size = f"{size_gib}Gi"
    labels = dict(PART_OF)
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": PROMETHEUS_VOLUME, "labels": labels},
        "spec": {
            "capacity": {"storage": size},
            "volumeMode": "Filesystem",
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": PROMETHEUS_STORAGE_CLASS,
            "csi": {"driver": EBS_CSI_DRIVER, "volumeHandle": volume_id, "fsType": "ext4"},
            # An EBS volume attaches only to an instance in its AZ: the scheduler puts Prometheus there.
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": ZONE_LABEL, "operator": "In", "values": [zone]}]}
                    ]
                }
            },
        },
    }
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": PROMETHEUS_CLAIM, "namespace": PLATFORM_NAMESPACE, "labels": labels},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": PROMETHEUS_STORAGE_CLASS,
            "volumeName": PROMETHEUS_VOLUME,
            "resources": {"requests": {"storage": size}},
        },
    }
    return [volume, claim]


def _prometheus_spec(cfg: MonitoringConfig, system_nodes: dict[str, str], claim_from_stack: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "retention": cfg.prometheus_retention,
        "scrapeInterval": SCRAPE_INTERVAL,
        "nodeSelector": system_nodes,
        # Select every ServiceMonitor / PodMonitor / rule in the cluster, not only the release's own.
        "serviceMonitorSelectorNilUsesHelmValues": False,
        "podMonitorSelectorNilUsesHelmValues": False,
        "ruleSelectorNilUsesHelmValues": False,
        "probeSelectorNilUsesHelmValues": False,
        "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}},
    }
    if cfg.prometheus_storage_gib:
        spec["storageSpec"] = {
            "volumeClaimTemplate": {
                "metadata": {"name": PROMETHEUS_CLAIM_TEMPLATE},
                "spec": {
                    "storageClassName": PROMETHEUS_STORAGE_CLASS,
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": f"{cfg.prometheus_storage_gib}Gi"}},
                },
            }
        }
        # Drop the oldest blocks before the volume fills: at 85% there is room for the WAL and compaction.
        spec["retentionSize"] = f"{max(1, int(cfg.prometheus_storage_gib * 0.85))}GB"
        # On the stack's own cluster the claim is the stack's (prometheus_volume_objects) and only `pulumi destroy`
        # deletes it: the StatefulSet keeps it (Retain). On an existing cluster the StatefulSet's claim is deleted with
        # it, and the StorageClass's reclaimPolicy Delete then removes the volume through that cluster's EBS CSI
        # driver, which the stack does not delete. The chart copies this value into the Prometheus resource
        # (kube-prometheus-stack 88.5.0, values.yaml and templates/prometheus/prometheus.yaml), the operator into the
        # StatefulSet (prometheus-operator v0.93, pkg/prometheus/server/statefulset.go), and Kubernetes acts on it
        # from 1.27 on (StatefulSetAutoDeletePVC, on by default).
        spec["persistentVolumeClaimRetentionPolicy"] = {
            "whenDeleted": "Retain" if claim_from_stack else "Delete",
            "whenScaled": "Retain",
        }
    return spec


def kube_prometheus_stack_values(
    cfg: MonitoringConfig, system_nodes: dict[str, str] | None = None, claim_from_stack: bool = True
) -> dict[str, Any]:
    """`system_nodes`: where the release's own pods go (workloads/platform/placement.py); None: the stack's system
    nodes. `claim_from_stack`: Prometheus' claim is the stack's (prometheus_volume_objects), on the stack's own
    cluster, rather than the StatefulSet's."""
    system_nodes = dict(SYSTEM_NODES if system_nodes is None else system_nodes)
    return {
        "crds": {"enabled": True},
        # No receivers are configured, so Alertmanager would only cost a pod; alerts still show in Prometheus.
        "alertmanager": {"enabled": False},
        # EKS runs the control plane: its scheduler, controller manager and etcd are not scrapeable, and the
        # kube-proxy add-on binds its metrics to localhost. Their targets would only ever be down.
        "kubeControllerManager": {"enabled": False},
        "kubeScheduler": {"enabled": False},
        "kubeEtcd": {"enabled": False},
        "kubeProxy": {"enabled": False},
        "prometheusOperator": {"nodeSelector": system_nodes},
        "kube-state-metrics": {"nodeSelector": system_nodes},
        # Node exporter belongs on every node, the tainted GPU nodes included.
        "prometheus-node-exporter": {"tolerations": [{"operator": "Exists"}]},
        "prometheus": {"prometheusSpec": _prometheus_spec(cfg, system_nodes, claim_from_stack)},
        "grafana": {
            "enabled": cfg.grafana,
            "fullnameOverride": GRAFANA_SERVICE,
            "nodeSelector": system_nodes,
            # Port-forward only, unless the stack asks for a public load balancer.
            "service": {"type": "LoadBalancer" if cfg.grafana_load_balancer else "ClusterIP"},
            "sidecar": {
                "dashboards": {
                    "enabled": True,
                    "label": DASHBOARD_LABEL,
                    "labelValue": DASHBOARD_LABEL_VALUE,
                    "searchNamespace": "ALL",
                },
            },
        },
    }


# The node monitoring agent's DCGM host engine (infra/addons.py): its dcgm-server DaemonSet runs
# `nv-hostengine -n -b ALL` and publishes container port 5555 on the node (hostPort), where the agent itself reaches it
# (aws/eks-node-monitoring-agent charts/eks-node-monitoring-agent/templates/dcgm-daemonset.yaml, README "DCGM host
# engine").
HOST_ENGINE_PORT = 5555
# The exporter's own flag for its metrics (the chart's default arguments).
DCGM_EXPORTER_COUNTERS = ["-f", "/etc/dcgm-exporter/default-counters.csv"]
NODE_IP_VARIABLE = "NODE_IP"


def dcgm_exporter_values(config: StackConfig) -> dict[str, Any]:
    """One exporter pod per GPU node. The chart's ServiceMonitor stays on: Prometheus selects it (see above).

    On the stack's own cluster the exporter starts no DCGM host engine of its own: it reads the node monitoring
    agent's, at the node's address (`-r HOST:PORT`, the exporter's remote-hostengine-info flag: NVIDIA/dcgm-exporter
    pkg/cmd/app.go, the chart's values.yaml "connect to an already running hostengine"). One host engine per GPU node,
    which both clients share, instead of two holding the GPUs' profiling counters. On an existing cluster the agent is
    the cluster's to install, so the exporter keeps its embedded engine (docs/aws.md, "Bad nodes")."""
    values: dict[str, Any] = {
        "nodeSelector": GPU_NODES,
        "tolerations": [GPU_TOLERATION],
        "serviceMonitor": {"enabled": True, "interval": SCRAPE_INTERVAL},
    }
    if config.cluster.existing:
        return values
    # The node's address from the downward API; Kubernetes expands $(NODE_IP) in the container's arguments.
    return {
        **values,
        "arguments": [*DCGM_EXPORTER_COUNTERS, "-r", f"$({NODE_IP_VARIABLE}):{HOST_ENGINE_PORT}"],
        "extraEnv": [{"name": NODE_IP_VARIABLE, "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}],
    }
