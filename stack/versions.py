"""Every pinned version the stack deploys, in one place: AMI types, EKS add-ons, Helm charts, images.

Bumping a version is a one-line change here; tests check that nothing else spells a chart or image version.
"""

from __future__ import annotations

from datetime import date

# EKS-optimised Amazon Linux 2023 AMIs, chosen by managed node groups through amiType (no AMI id to track).
GPU_AMI_TYPE = "AL2023_x86_64_NVIDIA"  # NVIDIA driver, container toolkit and EFA driver preinstalled
SYSTEM_AMI_TYPE = "AL2023_x86_64_STANDARD"
# Kubernetes minors the stack is tested against, with EKS's end of standard support and end of extended support
# (UTC dates; billing for extended support starts on the first). 1.33 and 1.34: EKS user guide, "Understand the
# Kubernetes version lifecycle on EKS", Amazon EKS Kubernetes release calendar (awsdocs/amazon-eks-user-guide
# latest/ug/versioning/kubernetes-versions.adoc). 1.35: EKS release 2026-01-27 plus EKS's 14 and 26 months, the dates
# AWS's aws-samples/sample-apex-skills EKS calendar and endoflife.date's amazon-eks page list. stack/config.py takes its
# versions from here, the newest the default; stack/kubernetes_support.py judges a stack's against today's date.
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
# Checked 2026-12-03, not against Docker Hub (hub.docker.com cannot be reached from here): unrelated public projects
# pin this very tag by digest, all with sha256:6acf597eeb8e376a96580dde4952f37cc017fef732bb40bfc73f28f25e3f64b4, so a
# CUDA 12.6 build of 2.13.0 is published; whether that digest is the multi-platform index was not checked, so the pin
# stays by tag.
TRAINER_BASE_IMAGE = "pytorch/pytorch:2.13.0-cuda12.6-cudnn9-runtime"
# The EFA installer adds libfabric with the EFA provider, rdma-core and the AWS OFI NCCL plugin (libnccl-ofi),
# the user-space half of EFA; the kernel half comes with the AMI. Checked 2026-12-03 against the EC2 user guide's
# "Elastic Fabric Adapter release notes" (efa-changelog): 1.47.0 released 2026-01-29. Newer releases exist there
# (1.48.0 2026-04-14, 1.50.0 2026-08-21, 1.51.0 2026-10-22 with libfabric 2.7.0amzn2.0 and the OFI NCCL plugin
# 1.22.0); this pin is the one built and tested with the trainer, and a bump needs a GPU run on EFA.
EFA_INSTALLER_VERSION = "1.47.0"

# --- Cluster platform (workloads/platform/component.py). Helm chart versions, by chart; the repositories are in
# workloads/platform/charts.py. Each was the newest release of its line when pinned.
NVIDIA_DEVICE_PLUGIN_CHART_VERSION = "0.19.3"  # nvidia-device-plugin, NVIDIA/k8s-device-plugin v0.19.3
EFA_DEVICE_PLUGIN_CHART_VERSION = "v0.5.30"  # aws-efa-k8s-device-plugin (eks-charts), plugin image v0.5.20
KUBE_PROMETHEUS_STACK_CHART_VERSION = "88.5.0"  # prometheus-operator v0.93, Grafana chart 12.x
DCGM_EXPORTER_CHART_VERSION = "4.8.2"  # dcgm-exporter, image 4.5.3-4.8.2
# The Cluster Autoscaler (workloads/platform/autoscaler.py): kubernetes/autoscaler's chart, tag
# cluster-autoscaler-chart-9.59.0 (2026-07-21, appVersion 1.35.0), and the autoscaler's image of the cluster's
# Kubernetes minor, the combination the autoscaler's README recommends and tests ("the Kubernetes control plane version
# for which it was meant"): each minor's newest patch release tag, cluster-autoscaler-1.33.6, -1.34.5, -1.35.2 (all
# 2026-07-22), whose images the chart pulls from registry.k8s.io/autoscaling/cluster-autoscaler.
CLUSTER_AUTOSCALER_CHART_VERSION = "9.59.0"
CLUSTER_AUTOSCALER_IMAGE_TAGS: dict[str, str] = {"1.33": "v1.33.6", "1.34": "v1.34.5", "1.35": "v1.35.2"}
# Kubeflow Training Operator v1 (PyTorchJob kubeflow.org/v1): a git tag of kubeflow/trainer (formerly
# kubeflow/training-operator), whose manifests/overlays/standalone kustomization the platform applies.
TRAINING_OPERATOR_VERSION = "v1.9.4"
# Kubeflow Trainer v2 (TrainJob trainer.kubeflow.org/v1alpha1, job.api trainjob): the kubeflow-trainer chart, whose
# version is its app version; it brings the JobSet chart 0.12.0 as a subchart (kubeflow/trainer v2.3.0,
# charts/kubeflow-trainer/Chart.yaml). Released 2026-08-06. 2.3 is the release every later one upgrades from: it
# moved the CRDs into templates, and its changelog requires a stop at 2.3 on the way from 2.0-2.2 to anything newer.
KUBEFLOW_TRAINER_CHART_VERSION = "2.3.0"
# etcd for torchrun rendezvous: 3.5 is the last minor with the v2 API (--enable-v2) that torch's etcd backends use.
# Checked 2026-12-03 against etcd-io/etcd CHANGELOG/CHANGELOG-3.5.md (main as of 2026-08-20): v3.5.33, released
# 2026-07-23, is the newest 3.5 patch (v3.5.34 not yet released), with fixes over v3.5.32 (a read-header timeout on
# the client HTTP server, the peer lease handler's unbounded body read). etcd's release script pushes every release
# to quay.io/coreos/etcd (scripts/release.sh; its release notes name quay.io the secondary registry). By tag: the
# releases publish no image digests, and none for this tag could be checked from a public source.
ETCD_IMAGE = "quay.io/coreos/etcd:v3.5.33"
# htop / nvtop inspection pods: Ubuntu 24.04 LTS from ECR Public's Docker official-images mirror (no Docker Hub
# rate limit from the nodes); the tools come from Ubuntu's archive when the pod starts. Pinned to the multi-platform
# index digest that docker-library/repo-info records for ubuntu:24.04 (repos/ubuntu/remote/24.04.md, the build of
# 2026-09-11); the mirror serves Docker Hub's manifests unchanged, so the digest is the same there.
NODE_TOOLS_IMAGE = (
    "public.ecr.aws/docker/library/ubuntu:24.04@sha256:69cecf4bbf72d2d44a9eef1b71fb98c7fb973d78af11399deccef19beb008ad9"
)
# The Amazon CloudWatch Observability EKS add-on; None: the default version EKS publishes for the cluster's
# Kubernetes version, resolved at deploy time like the add-ons above.
CLOUDWATCH_OBSERVABILITY_ADDON_VERSION: str | None = None
