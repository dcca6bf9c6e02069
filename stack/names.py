"""Names the platform and the training job must agree on, in one torch-free module both import.

The platform (workloads/platform/component.py) deploys etcd behind a Service with these names; the PyTorchJob
(workloads/job/spec.py) points torchrun's rendezvous at it. Changing one here changes both.
"""

from __future__ import annotations

import re

# The namespace of the cluster's own services (etcd, the training operator, monitoring).
PLATFORM_NAMESPACE = "fsdp-system"
# The namespace the PyTorchJob, its pods and its Secret live in; the job component (workloads/job/component.py)
# creates it.
TRAINING_NAMESPACE = "training"

# etcd for torchrun's etcd-v2 rendezvous: a Service named "etcd" in the platform namespace, client port 2379
# (the port etcd registers with IANA for client traffic).
ETCD_SERVICE_NAME = "etcd"
ETCD_CLIENT_PORT = 2379
ETCD_SERVICE_HOST = f"{ETCD_SERVICE_NAME}.{PLATFORM_NAMESPACE}.svc.cluster.local"
ETCD_ENDPOINT = f"{ETCD_SERVICE_HOST}:{ETCD_CLIENT_PORT}"

# Node labels and the taint the GPU node group carries (infra/gpu_nodes.py sets them; pods select on them).
NODE_GROUP_LABEL = "fsdp-eks/node-group"
GPU_NODE_GROUP = "gpu"
SYSTEM_NODE_GROUP = "system"  # the CPU system node group (infra/cluster.py): etcd, the operator, monitoring
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "true"
GPU_TAINT_EFFECT = "NoSchedule"

# The trainer's pods: a label to select them by (a Prometheus PodMonitor, kubectl, etcd's NetworkPolicy), the stack
# they belong to, and the named container port where rank 0 serves its Prometheus metrics.
COMPONENT_LABEL = "fsdp-eks/component"
TRAINER_COMPONENT = "trainer"
STACK_LABEL = "fsdp-eks/stack"
# Every object the project builds itself carries this label (Kubernetes' recommended app.kubernetes.io/part-of).
PART_OF = {"app.kubernetes.io/part-of": "fsdp-eks"}
# The training operator labels the leader pod of a PyTorchJob, the Master replica or else Worker 0, with this role
# (kubeflow/trainer v1.9.4: pkg/apis/kubeflow.org/v1/common_types.go JobRoleLabel; pkg/controller.v1/common/pod.go
# sets it where IsMasterRole holds, which for a PyTorchJob without a Master is Worker index 0).
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
LEADER_ROLE = "master"
# A TrainJob's leader is node 0, the pod of completion index 0 of the JobSet's "node" Job: Trainer v2 sets torchrun's
# node rank from that index and its master address to that pod (kubeflow/trainer v2.3.0,
# pkg/runtime/framework/plugins/torch/torch.go). The Job controller labels every pod of an Indexed Job with its index
# (Kubernetes docs, Jobs: Completion mode; the PodIndexLabel feature, on by default since 1.28).
JOB_COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
TRAINER_METRICS_PORT_NAME = "metrics"
TRAINER_METRICS_PORT = 9300

# Kubernetes label values (apimachinery pkg/util/validation/validation.go IsValidLabelValue): at most 63 characters,
# empty or a letter or digit at both ends with '-', '_' and '.' between. The stack's name is one (STACK_LABEL).
LABEL_VALUE_MAX_LENGTH = 63
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
# DNS-1035 labels (IsDNS1035Label): Service names, the PyTorchJob's name (its webhook) and every name JobSet derives
# from a TrainJob's (its webhook); DNS-1123 labels (pod host names) have the same length limit.
DNS_LABEL_MAX_LENGTH = 63
DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")

# The job's name: "fsdp-" and the stack's name made a DNS-1035 label, cut at JOB_NAME_MAX_LENGTH so that the names the
# operator and JobSet derive from it fit at any node count (stack/checks.py checks each of them).
JOB_NAME_PREFIX = "fsdp-"
JOB_NAME_MAX_LENGTH = 40


def uncut_job_name(stack: str) -> str:
    """The prefix and the stack's name in lowercase letters, digits and '-': a DNS-1035 label but for its length."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", stack.lower()).strip("-")
    return f"{JOB_NAME_PREFIX}{cleaned}"


def job_name(stack: str) -> str:
    """The PyTorchJob's or TrainJob's name for a stack (workloads/job/spec.py names the job with it): a DNS-1035
    label short enough for the names derived from it; the config check (stack/checks.py stack_name_problems)
    refuses a stack name it would cut."""
    return uncut_job_name(stack)[:JOB_NAME_MAX_LENGTH].rstrip("-")


# Every IAM role and customer managed policy the program creates lives under this path, and carries the stack's tag.
# The CI deploy role may pass, change and attach only what is under it (ci/deploy_policy.py), so a leaked deploy
# session cannot reach the account's other roles. Roles with a path are fine in EKS access entries and Pod Identity
# associations (EKS user guide, "Create access entries": "If the ARN is for an IAM role, it can include a path").
IAM_PATH = "/fsdp-eks/"
# The tag key that marks an AWS resource as the stack's (its value is the Pulumi stack name): KMS keys, roles and
# policies carry it, and the deploy role's KMS and IAM grants are conditioned on it (aws:ResourceTag).
STACK_TAG_KEY = "fsdp-eks:stack"
# Every cluster the stack names itself starts with this (the default is fsdp-eks-<stack>): the CI deploy role manages
# only clusters so named (ci/deploy_policy.py), and a CI-deployed stack's own cluster.name must keep it
# (stack/cluster_checks.py).
CLUSTER_NAME_PREFIX = "fsdp-eks-"
# Every Secrets Manager secret a CI-deployed stack's roles may read is named under this prefix (the token's secret,
# job.hfTokenSecret, is fsdp-eks/hf-token): the permissions boundary allows GetSecretValue, and kms:Decrypt through
# Secrets Manager, only on secrets so named (ci/role_boundary.py), so a hostile plan's policy under IAM_PATH cannot
# read the account's other secrets; preview refuses a token secret outside it on such a stack
# (stack/cluster_checks.py).
SECRET_NAME_PREFIX = "fsdp-eks/"

# The bucket the stack creates for a run's durable artifacts when artifacts.bucket names none (infra/artifacts.py)
# starts with this: the CI deploy role and the role boundary scope S3 to buckets so named (ci/deploy_policy.py,
# ci/role_boundary.py), as they scope clusters to CLUSTER_NAME_PREFIX.
ARTIFACTS_BUCKET_PREFIX = "fsdp-eks-"
# What the provider accepts as a bucket_prefix: at most 37 characters (pulumi-aws 7.51.1, s3/bucket.py
# BucketArgs.bucket_prefix), followed by a 26-character unique suffix (terraform-plugin-sdk helper/id
# PrefixedUniqueId) to S3's 63 (Amazon S3 user guide, "Bucket naming rules").
BUCKET_PREFIX_MAX_LENGTH = 37
ARTIFACTS_BUCKET_SUFFIX = "-artifacts-"
# The job's pods hold the artifacts bucket's name in this variable; the trainer's --artifacts-uri refers to it as
# $(FSDP_EKS_ARTIFACTS_BUCKET), which Kubernetes expands from the container's environment (core/v1 Container.args
# and .command: "Variable references $(VAR_NAME) are expanded using the container's environment"). So every flag is
# known at preview, and only the variable's value waits for a bucket the stack creates.
ARTIFACTS_BUCKET_VARIABLE = "FSDP_EKS_ARTIFACTS_BUCKET"


def artifacts_bucket_prefix(stack: str) -> str:
    """The bucket_prefix of the stack's own artifacts bucket: ARTIFACTS_BUCKET_PREFIX, the stack's name in what a
    bucket name allows (lowercase letters, digits, '-'), cut to fit, and ARTIFACTS_BUCKET_SUFFIX."""
    cleaned = re.sub(r"[^a-z0-9]+", "-", stack.lower()).strip("-")
    room = BUCKET_PREFIX_MAX_LENGTH - len(ARTIFACTS_BUCKET_PREFIX) - len(ARTIFACTS_BUCKET_SUFFIX)
    return f"{ARTIFACTS_BUCKET_PREFIX}{cleaned[:room].strip('-')}{ARTIFACTS_BUCKET_SUFFIX}"
