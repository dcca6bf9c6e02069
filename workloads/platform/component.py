"""The cluster platform a training job on EFA GPU nodes needs, as one component on the cluster's provider:
device plugins (NVIDIA, EFA), the job's controller (for a PyTorchJob the Kubeflow Training Operator and etcd for
rendezvous; for a TrainJob Kubeflow Trainer v2 with JobSet, workloads/platform/trainer_v2.py), and monitoring
(Prometheus, Grafana with the project's dashboards, the DCGM exporter), plus the optional CloudWatch add-on and node
tools.

Ordering, for a first `pulumi up` and for `pulumi destroy`:
- the platform namespace before anything in it;
- Grafana's dashboards, Prometheus' StorageClass and, on the stack's own cluster, Prometheus' EBS volume, its
  PersistentVolume and claim before kube-prometheus-stack, whose CRDs come before the DCGM exporter's ServiceMonitor
  and the trainer's PodMonitor; `pulumi destroy` deletes the claim, the PersistentVolume (once detached) and the EBS
  volume after the chart and before the EBS CSI driver and the nodes (workloads/platform/monitoring.py);
- the node agents (device plugins, DCGM exporter, node tools, CloudWatch) and the Cluster Autoscaler after
  `depends_on` (the GPU node group, and the autoscaler's Pod Identity association);
- the training job depends on this component (`depends_on=[platform]`), so it is created after the training
  operator's (or Trainer v2's and JobSet's) CRDs and webhooks are ready and deleted before any of the platform goes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from infra.iam import PodIdentity, cluster_arn, pod_identity_trust_policy, role_with_policies
from stack.config import StackConfig
from stack.names import ETCD_ENDPOINT, PLATFORM_NAMESPACE, TRAINING_NAMESPACE
from stack.versions import CLOUDWATCH_OBSERVABILITY_ADDON_VERSION, TRAINING_OPERATOR_VERSION
from workloads.job.api import Controller, job_api_for
from workloads.k8s_resources import kubernetes_resource, resource_name
from workloads.platform.autoscaler import autoscaler_chart
from workloads.platform.charts import ChartRelease, dcgm_exporter_chart, device_plugin_charts, monitoring_chart
from workloads.platform.monitoring import stack_prometheus_volume
from workloads.platform.objects import (
    grafana_objects,
    next_commands,
    node_tools_objects,
    platform_namespace,
    prometheus_claim_objects,
    rendezvous_objects,
    scrape_objects,
    storage_objects,
    trainer_v2_objects,
)
from workloads.platform.trainer_v2 import trainer_v2_chart

# The operator's standalone kustomization (CRDs, RBAC, webhook, Deployment in namespace "kubeflow") at a release
# tag, built by Pulumi's kustomize support; the machine running `pulumi up` needs git for the remote build.
TRAINING_OPERATOR_MANIFESTS = (
    f"https://github.com/kubeflow/trainer//manifests/overlays/standalone?ref={TRAINING_OPERATOR_VERSION}"
)
OCI_PREFIX = "oci://"
CLOUDWATCH_ADDON = "amazon-cloudwatch-observability"
CLOUDWATCH_SERVICE_ACCOUNT = "cloudwatch-agent"
CLOUDWATCH_IDENTITY = PodIdentity("amazon-cloudwatch", CLOUDWATCH_SERVICE_ACCOUNT)


@dataclass
class PlatformArgs:
    provider: k8s.Provider
    """The cluster's Kubernetes provider; every Kubernetes object of the platform is created through it."""
    config: StackConfig
    depends_on: Sequence[pulumi.Resource] = field(default_factory=list)
    """What node agents wait for, e.g. the GPU node group (their charts wait for their pods to be ready)."""
    autoscaling_group: pulumi.Input[str] | None = None
    """The GPU node group's Auto Scaling group, which the Cluster Autoscaler scales; None: no autoscaler (an existing
    cluster, or a group whose bounds leave it nothing to do)."""


class Platform(pulumi.ComponentResource):
    platform_namespace: str
    training_namespace: str
    etcd_endpoint: str | None  # None for a TrainJob: no etcd is installed
    next_commands: dict[str, str]  # Grafana's password among them: read from its chart's Secret in the cluster

    def __init__(self, name: str, args: PlatformArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fsdp-eks:workloads:Platform", name, None, opts)
        self._name, self._provider, cfg = name, args.provider, args.config
        after_nodes = list(args.depends_on)
        namespace = self._object(platform_namespace())
        in_namespace = [namespace]

        for obj in rendezvous_objects(cfg):
            self._object(obj, depends_on=in_namespace)
        for chart in device_plugin_charts(cfg):
            self._release(chart, depends_on=after_nodes)
        if args.autoscaling_group is not None:
            self._release(autoscaler_chart(cfg, args.autoscaling_group), depends_on=after_nodes)
        # The controller of the job's API, and nothing of the other one.
        self.job_controller = self._job_controller(cfg)

        if cfg.monitoring.enabled:
            self._monitoring(cfg, in_namespace, after_nodes)
        for obj in node_tools_objects(cfg):
            self._object(obj, depends_on=[*in_namespace, *after_nodes])
        if cfg.monitoring.cloudwatch_observability:
            self._cloudwatch_addon(cfg, cfg.cluster_name, after_nodes)

        self.platform_namespace = PLATFORM_NAMESPACE
        self.training_namespace = TRAINING_NAMESPACE
        self.etcd_endpoint = ETCD_ENDPOINT if job_api_for(cfg.job.api).platform.etcd else None
        self.next_commands = next_commands(cfg)
        self.register_outputs(
            {
                "platformNamespace": self.platform_namespace,
                "trainingNamespace": self.training_namespace,
                "etcdEndpoint": self.etcd_endpoint,
                "nextCommands": self.next_commands,
            }
        )

    def _job_controller(self, cfg: StackConfig) -> pulumi.Resource:
        """The Training Operator v1 for a PyTorchJob; Kubeflow Trainer v2 with JobSet for a TrainJob. The job depends
        on the whole platform, so it is created after either is ready and deleted before either goes. The one place
        the platform tells the controllers apart: each is a Pulumi resource of its own kind (a Helm release, a
        kustomize build)."""
        if job_api_for(cfg.job.api).platform.controller is Controller.TRAINER_V2:
            namespace = [self._object(obj) for obj in trainer_v2_objects(cfg)]
            return self._release(trainer_v2_chart(), depends_on=namespace)
        return k8s.kustomize.v2.Directory(
            f"{self._name}-training-operator",
            directory=TRAINING_OPERATOR_MANIFESTS,
            opts=self._k8s_opts(),
        )

    def _monitoring(
        self, cfg: StackConfig, in_namespace: Sequence[pulumi.Resource], after_nodes: Sequence[pulumi.Resource]
    ):
        before_chart: list[pulumi.Resource] = [self._object(obj) for obj in storage_objects(cfg)]
        if stack_prometheus_volume(cfg):
            before_chart.append(self._prometheus_claim(cfg, in_namespace))
        # Grafana's admin password is made by its chart in the cluster (monitoring.py, GRAFANA_ADMIN_SECRET).
        before_chart += [self._object(obj, depends_on=in_namespace) for obj in grafana_objects(cfg)]
        stack = self._release(monitoring_chart(cfg), depends_on=[*in_namespace, *before_chart])
        # The ServiceMonitor in the DCGM exporter's chart and the PodMonitor need the stack's CRDs.
        self._release(dcgm_exporter_chart(cfg), depends_on=[stack, *after_nodes])
        for obj in scrape_objects(cfg):
            self._object(obj, depends_on=[*in_namespace, stack])

    def _prometheus_claim(self, cfg: StackConfig, in_namespace: Sequence[pulumi.Resource]) -> pulumi.Resource:
        """Prometheus' EBS volume, its PersistentVolume and the claim the StatefulSet takes (objects.py)."""
        volume = aws.ebs.Volume(
            f"{self._name}-prometheus",
            availability_zone=cfg.gpu_availability_zone,
            size=cfg.monitoring.prometheus_storage_gib,
            type="gp3",
            encrypted=True,
            tags={"Name": f"{cfg.cluster_name}-prometheus"},
            opts=pulumi.ResourceOptions(parent=self),
        )
        persistent_volume, claim = prometheus_claim_objects(cfg, volume.id)
        # The claim goes once Prometheus' pod has stopped (it writes its head block out first) and the
        # PersistentVolume once the volume is detached: longer than the provider's default wait of 10 minutes.
        slow = pulumi.ResourceOptions(custom_timeouts=pulumi.CustomTimeouts(delete="30m"), delete_before_replace=True)
        pv = k8s.core.v1.PersistentVolume(
            resource_name(persistent_volume, self._name),
            metadata=persistent_volume["metadata"],
            spec=persistent_volume["spec"],
            opts=pulumi.ResourceOptions.merge(self._k8s_opts(), slow),
        )
        return k8s.core.v1.PersistentVolumeClaim(
            resource_name(claim, self._name),
            metadata=claim["metadata"],
            spec=claim["spec"],
            opts=pulumi.ResourceOptions.merge(self._k8s_opts([*in_namespace, pv]), slow),
        )

    def _cloudwatch_addon(
        self, cfg: StackConfig, cluster_name: pulumi.Input[str], after_nodes: list[pulumi.Resource]
    ) -> aws.eks.Addon:
        invoke = pulumi.InvokeOutputOptions(parent=self)
        partition = aws.get_partition_output(opts=invoke).partition
        account = aws.get_caller_identity_output(opts=invoke).account_id
        # Only the agent's service account in this cluster may assume the role (infra/iam.py).
        trust = pulumi.Output.all(partition, account, cluster_name).apply(
            lambda v: pod_identity_trust_policy(CLOUDWATCH_IDENTITY, cluster_arn(v[0], cfg.region, v[1], v[2]))
        )
        role = role_with_policies(f"{self._name}-cloudwatch", trust, ("CloudWatchAgentServerPolicy",), partition, self)
        version = (
            CLOUDWATCH_OBSERVABILITY_ADDON_VERSION
            or aws.eks.get_addon_version_output(
                addon_name=CLOUDWATCH_ADDON,
                kubernetes_version=cfg.cluster.kubernetes_version,
                most_recent=False,
                opts=pulumi.InvokeOutputOptions(parent=self),
            ).version
        )
        return aws.eks.Addon(
            f"{self._name}-cloudwatch-observability",
            cluster_name=cluster_name,
            addon_name=CLOUDWATCH_ADDON,
            addon_version=version,
            # Credentials through EKS Pod Identity, not the node role: only the agent gets CloudWatch write access.
            pod_identity_associations=[{"role_arn": role.role.arn, "service_account": CLOUDWATCH_SERVICE_ACCOUNT}],
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            # The agent writes with the attached policy until it is gone (infra/iam.py PolicyRole).
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*after_nodes, *role.attachments]),
        )

    def _k8s_opts(self, depends_on: Sequence[pulumi.Resource] = ()) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, provider=self._provider, depends_on=list(depends_on))

    def _object(self, obj: dict[str, Any], depends_on: Sequence[pulumi.Resource] = ()) -> pulumi.CustomResource:
        return kubernetes_resource(obj, self._k8s_opts(depends_on), prefix=self._name)

    def _release(self, chart: ChartRelease, depends_on: Sequence[pulumi.Resource] = ()) -> k8s.helm.v3.Release:
        # An OCI registry has no index to name as a repository: the chart reference carries it (oci://host/path/chart).
        oci = chart.repository.startswith(OCI_PREFIX)
        return k8s.helm.v3.Release(
            f"{self._name}-{chart.key}",
            name=chart.release_name,
            chart=f"{chart.repository}/{chart.chart}" if oci else chart.chart,
            version=chart.version,
            repository_opts=None if oci else {"repo": chart.repository},
            namespace=chart.namespace,
            values=chart.values,
            timeout=chart.timeout_s,
            # A failed first install is removed rather than left half-applied for the next `pulumi up` to trip on.
            cleanup_on_fail=True,
            max_history=5,
            opts=self._k8s_opts(depends_on),
        )
