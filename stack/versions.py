"""Every pinned version the stack deploys, in one place: AMI types, EKS add-ons, Helm charts, images.

Bumping a version is a one-line change here; tests check that nothing else spells a chart or image version.
"""

from __future__ import annotations

from datetime import date

# EKS-optimised Amazon Linux 2023 AMIs, chosen by managed node groups through amiType (no AMI id to track).
GPU_AMI_TYPE = "AL2023_x86_64_NVIDIA"  # NVIDIA driver, container toolkit and EFA driver preinstalled
SYSTEM_AMI_TYPE = "AL2023_x86_64_STANDARD"
# Kubernetes minors the stack is tested against, with EKS's end of standard support and end of extended support
# (UTC dates; billing for extended support starts on the first): EKS's release calendar, and for 1.35 its release
# plus EKS's 14 and 26 months (sources and dates: docs/versions.md). stack/config.py takes its versions from here,
# the newest the default; stack/kubernetes_support.py judges a stack's against today's date.
EKS_SUPPORT_ENDS: dict[str, tuple[date, date]] = {
    "1.33": (date(2026, 7, 29), date(2027, 7, 29)),
    "1.34": (date(2026, 12, 2), date(2027, 12, 2)),
    "1.35": (date(2027, 3, 27), date(2028, 3, 27)),
}
# USD per cluster-hour of the control plane: standard support, extended support (AWS Containers blog, "Amazon EKS
# extended support for Kubernetes versions pricing": $0.60 in total in extended support, $0.10 in standard).
EKS_CLUSTER_HOUR_USD = (0.10, 0.60)

# EKS add-ons, by add-on name. None means "the default version EKS publishes for the cluster's Kubernetes
# version", resolved at deploy time by the aws.eks.getAddonVersion data source with mostRecent=false, so a
# version bump of Kubernetes brings the matching add-on versions and a stack never asks for an unpublished one.
EKS_ADDONS: dict[str, str | None] = {
    "vpc-cni": None,
    "coredns": None,
    "kube-proxy": None,
    "aws-ebs-csi-driver": None,
    "eks-pod-identity-agent": None,
    # Mounts the checkpoint file system (a static PersistentVolume: no IAM role needed to mount).
    "aws-fsx-csi-driver": None,
    # The node monitoring agent, whose node conditions node auto repair acts on (infra/addons.py).
    "eks-node-monitoring-agent": None,
}

# The trainer's container image (docker/Dockerfile, built by workloads/job/image.py; see docs/job.md).
# PyTorch's official CUDA runtime image fixes torch, CUDA and cuDNN together; its torch is the one the tests run
# (the Makefile's torch==, checked by tests/workloads/job/test_job_image.py). CUDA 12.6 runs on the R570 driver of the
# AL2023 NVIDIA AMI and supports A100, H100/H200 and L40S.
# Pinned by tag: whether the digest others pin it by is the multi-platform index is not known (docs/versions.md).
TRAINER_BASE_IMAGE = "pytorch/pytorch:2.13.0-cuda12.6-cudnn9-runtime"
# The EFA installer adds libfabric with the EFA provider, rdma-core and the AWS OFI NCCL plugin (libnccl-ofi),
# the user-space half of EFA; the kernel half comes with the AMI. This pin is the one built and tested with the
# trainer, and a bump needs a GPU run on EFA (the newer releases: docs/versions.md).
EFA_INSTALLER_VERSION = "1.47.0"

# --- Cluster platform (workloads/platform/component.py). Helm chart versions, by chart; the repositories are in
# workloads/platform/charts.py.
NVIDIA_DEVICE_PLUGIN_CHART_VERSION = "0.19.3"  # nvidia-device-plugin, NVIDIA/k8s-device-plugin v0.19.3
EFA_DEVICE_PLUGIN_CHART_VERSION = "v0.5.30"  # aws-efa-k8s-device-plugin (eks-charts), plugin image v0.5.20
KUBE_PROMETHEUS_STACK_CHART_VERSION = "88.5.0"  # prometheus-operator v0.93, Grafana chart 12.x
DCGM_EXPORTER_CHART_VERSION = "4.8.2"  # dcgm-exporter, image 4.5.3-4.8.2
# The Cluster Autoscaler (workloads/platform/autoscaler.py): kubernetes/autoscaler's chart, tag
# cluster-autoscaler-chart-9.59.0 (appVersion 1.35.0), and the autoscaler's image of the cluster's Kubernetes minor,
# the combination the autoscaler's README recommends and tests ("the Kubernetes control plane version for which it was
# meant"): each minor's newest patch release tag, cluster-autoscaler-1.33.6, -1.34.5, -1.35.2, whose images the chart
# pulls from registry.k8s.io/autoscaling/cluster-autoscaler.
CLUSTER_AUTOSCALER_CHART_VERSION = "9.59.0"
CLUSTER_AUTOSCALER_IMAGE_TAGS: dict[str, str] = {"1.33": "v1.33.6", "1.34": "v1.34.5", "1.35": "v1.35.2"}
# Kubeflow Training Operator v1 (PyTorchJob kubeflow.org/v1): a git tag of kubeflow/trainer (formerly
# kubeflow/training-operator), whose manifests/overlays/standalone kustomization the platform applies.
TRAINING_OPERATOR_VERSION = "v1.9.4"
# Kubeflow Trainer v2 (TrainJob trainer.kubeflow.org/v1alpha1, job.api trainjob): the kubeflow-trainer chart, whose
# version is its app version; it brings the JobSet chart 0.12.0 as a subchart (kubeflow/trainer v2.3.0,
# charts/kubeflow-trainer/Chart.yaml). 2.3 is the release every later one upgrades from: it moved the CRDs into
# templates, and its changelog requires a stop at 2.3 on the way from 2.0-2.2 to anything newer.
KUBEFLOW_TRAINER_CHART_VERSION = "2.3.0"
# etcd for torchrun rendezvous: 3.5 is the last minor with the v2 API (--enable-v2) that torch's etcd backends use;
# v3.5.33 was its newest patch when pinned (docs/versions.md). etcd's release script pushes every release to
# quay.io/coreos/etcd (scripts/release.sh; its release notes name quay.io the secondary registry). By tag: the
# releases publish no image digests.
ETCD_IMAGE = "quay.io/coreos/etcd:v3.5.33"
# htop / nvtop inspection pods: Ubuntu 24.04 LTS from ECR Public's Docker official-images mirror (no Docker Hub
# rate limit from the nodes); the tools come from Ubuntu's archive when the pod starts. Pinned to the multi-platform
# index digest that docker-library/repo-info records for ubuntu:24.04 (repos/ubuntu/remote/24.04.md); the mirror
# serves Docker Hub's manifests unchanged, so the digest is the same there.
NODE_TOOLS_IMAGE = (
    "public.ecr.aws/docker/library/ubuntu:24.04@sha256:69cecf4bbf72d2d44a9eef1b71fb98c7fb973d78af11399deccef19beb008ad9"
)
# The Amazon CloudWatch Observability EKS add-on; None: the default version EKS publishes for the cluster's
# Kubernetes version, resolved at deploy time like the add-ons above.
CLOUDWATCH_OBSERVABILITY_ADDON_VERSION: str | None = None
