"""The worker pod both job APIs run (workloads/job/api.py): one pod per node over all of its GPUs, on the stack's GPU
node group. It holds its init container, /dev/shm, checkpoint volume, staged cache, service account, token secret's
name, network settings and resources. Each API supplies only its trainer container's name, command and ports
(workloads/job/pytorchjob.py, workloads/job/trainjob.py) and, for a TrainJob, the pod's restartPolicy; everything
else is the same pod, so the PodMonitor, the dashboards and the policy pack find it whichever API ran it.

Also the namespace and service account every job has. Pure functions of a JobSpec (workloads/job/spec.py) returning
plain dicts. No object holds the Hugging Face token: the pods name the Secrets Manager secret and read it themselves
(trainer/base/pod/hub_token.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from stack.names import (
    ARTIFACTS_BUCKET_VARIABLE,
    COMPONENT_LABEL,
    GPU_NODE_GROUP,
    GPU_TAINT_EFFECT,
    GPU_TAINT_KEY,
    GPU_TAINT_VALUE,
    INSTANCE_TYPE_LABEL,
    NODE_GROUP_LABEL,
    PART_OF,
    STACK_LABEL,
    TRAINER_COMPONENT,
    TRAINER_METRICS_PORT,
    TRAINER_METRICS_PORT_NAME,
)
from stack.node_contract import EFA_RESOURCE, GPU_RESOURCE, HUGEPAGES_RESOURCE
from trainer.base.flags.config import to_argv
from trainer.base.pod.bad_node import NODE_NAME_FIELD, NODE_NAME_VARIABLE
from trainer.base.pod.hub_token import REGION_VARIABLE, SECRET_VARIABLE
from workloads.job.shutdown import TERMINATION_GRACE_S
from workloads.job.spec import CHECKPOINT_MOUNT, JobSpec
from workloads.job.staging import worker_env

TRAINER_UID = 1000  # the image's non-root user (docker/Dockerfile)
CACHE_MOUNT = "/cache"
# The image's interpreter: the PyTorch base image puts it on PATH (docker/Dockerfile runs `python -m pip` with it).
PYTHON = "python"
# The name NCCL knows the AWS OFI NCCL plugin by: "Libfabric" since aws-ofi-nccl 1.13
# (src/nccl_ofi_interface_nvidia.cpp; "AWS Libfabric" and "OFI" are accepted aliases); EFA installers ship 1.16
# and later since 1.43 (EFA release notes). With NCCL_NET set, NCCL initialises only the network of that name and
# fails the communicator without it (NVIDIA/nccl src/plugin/net.cc, ncclNetInit); unset, it quietly falls back to
# TCP sockets.
OFI_NCCL_NET = "Libfabric"
# The init container only creates and hands over a directory; requests equal to limits keep the pod Guaranteed
# (Kubernetes counts init containers in a pod's QoS class).
INIT_RESOURCES = {"cpu": "100m", "memory": "64Mi"}
PREPARE_CHECKPOINTS = "prepare-checkpoints"
# The artifacts bucket variable's value in a manifest printed before the stack has created its bucket (the render CLI,
# the policy pack's examples); the job component sets the created bucket's name instead (with_artifacts_bucket).
UNCREATED_BUCKET = "<the stack's artifacts bucket, named when pulumi up creates it>"
# Kubernetes' variable references in a container's command and args: $(NAME) from the container's environment, and
# $$ for a literal $ (core/v1 Container.command: "Variable references $(VAR_NAME) are expanded using the container's
# environment. If a variable cannot be resolved, the reference in the input string will be unchanged. Double $$ are
# reduced to a single $, which allows for escaping the $(VAR_NAME) syntax").
# The kubelet's expansion of `$(VAR)` in a container's command and args (kubernetes
# third_party/forked/golang/expansion/expand.go, Expand): `$$` is a literal `$`; `$(NAME)` becomes the value of the
# container's variable NAME, and stays as written when there is none; any other `$` is left alone.
_REFERENCE = re.compile(r"\$(\$|\(([^)]*)\))")


@dataclass(frozen=True)
class TrainerContainer:
    """What each API makes of the trainer's container: the name its controller looks for, the command (the launcher
    with that API's torchrun flags) and the ports."""

    name: str
    command: list[str]
    ports: list[dict[str, Any]]
    env: tuple[dict[str, Any], ...] = ()  # variables only this API's container has, after the shared ones


def trainer_args(spec: JobSpec) -> list[str]:
    """`python -m trainer` flags: the spec's TrainConfig as the trainer's own parser reads it back."""
    return to_argv(spec.trainer)


def labels(spec: JobSpec) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "fsdp-trainer",
        **PART_OF,
        STACK_LABEL: spec.stack,
        "fsdp-eks/run": str(spec.run),
        COMPONENT_LABEL: TRAINER_COMPONENT,
    }


# How a rank's ProcessGroupNCCL handles a collective that fails or passes its timeout (--timeout-minutes), set
# explicitly rather than left to defaults that have moved between torch releases (the watchdog's heartbeat timeout
# was 10 minutes before it became 8). Names from torch 2.13's torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp
# (docs/job.md, "NCCL's error handling").
NCCL_ERROR_HANDLING = {
    # 3, SkipCleanUp (torch's documented default): the watchdog takes the process down on a failed or timed-out
    # collective without ncclCommAbort first, which can itself hang; the agent sees the worker fail and restarts.
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",
    # 0: work.wait() only queues the stream wait; the watchdog thread times collectives out, not the main thread.
    "TORCH_NCCL_BLOCKING_WAIT": "0",
    # A monitor thread ends the process when the watchdog itself has not beaten for the timeout (a CUDA or NCCL call
    # hung inside it), so no rank outlives a stuck watchdog by more than 8 minutes.
    "TORCH_NCCL_ENABLE_MONITORING": "1",
    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "480",
}


def network_env(spec: JobSpec) -> list[dict[str, Any]]:
    """NCCL and libfabric settings for the node type, NCCL's error handling, and the diagnostic switches from
    config."""
    env = [
        {"name": "NCCL_DEBUG", "value": spec.nccl_debug},
        {"name": "TORCH_DISTRIBUTED_DEBUG", "value": spec.distributed_debug},
        *({"name": name, "value": value} for name, value in NCCL_ERROR_HANDLING.items()),
    ]
    if spec.node.efa_interfaces:
        env += [
            # NCCL reaches EFA through the AWS OFI NCCL plugin, and libfabric through the EFA provider: naming both
            # makes a node without a working plugin or EFA device fail loudly instead of falling back to TCP sockets
            # at a fraction of the bandwidth.
            {"name": "NCCL_NET", "value": OFI_NCCL_NET},
            {"name": "FI_PROVIDER", "value": "efa"},
            # DataLoader workers fork after libfabric registered memory; fork-safe mode keeps the child from
            # corrupting those registrations (a no-op on kernels that handle it themselves).
            {"name": "FI_EFA_FORK_SAFE", "value": "1"},
        ]
    if spec.node.gpudirect_rdma:
        env.append({"name": "FI_EFA_USE_DEVICE_RDMA", "value": "1"})  # GPUDirect RDMA: NIC <-> GPU memory
    return env


def hub_token_env(spec: JobSpec) -> list[dict[str, Any]]:
    """Where the launcher reads the Hugging Face token (trainer/base/pod/hub_token.py): the secret's name or ARN, when
    the stack names a secret (in the region aws_env names); nothing otherwise (public models and the synthetic data
    set need no token, and the config check refuses a gated model without a secret). The value is not secret."""
    if spec.hub_token is None:
        return []
    return [{"name": SECRET_VARIABLE, "value": spec.hub_token.secret}]


def aws_env(spec: JobSpec) -> list[dict[str, Any]]:
    """The region every AWS client of the pod calls (the token's secret, the artifacts bucket, s3:// inputs), and the
    artifacts bucket's name that --artifacts-uri refers to (stack/artifacts.py artifacts_flag)."""
    region = spec.hub_token.region if spec.hub_token is not None else spec.artifacts.region
    return [
        {"name": REGION_VARIABLE, "value": region},
        {"name": ARTIFACTS_BUCKET_VARIABLE, "value": spec.artifacts.bucket or UNCREATED_BUCKET},
    ]


def node_name_env() -> dict[str, Any]:
    """The pod's node, from the downward API: the preflight names a slow node by it, and the launcher taints that node
    after EXIT_BAD_NODE (trainer/launch/node_taint.py)."""
    return {"name": NODE_NAME_VARIABLE, "valueFrom": {"fieldRef": {"fieldPath": NODE_NAME_FIELD}}}


def container_env(spec: JobSpec) -> list[dict[str, Any]]:
    return [
        *hub_token_env(spec),
        *aws_env(spec),
        node_name_env(),
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        *worker_env(spec),  # the staged Hugging Face cache, hub offline, allocator and compile cache
        *network_env(spec),
    ]


def resources(spec: JobSpec) -> dict[str, dict[str, str]]:
    """Requests equal to limits (Guaranteed QoS: the last pods the kubelet evicts under memory pressure)."""
    node = spec.node
    amounts = {
        "cpu": str(node.cpus),
        "memory": f"{node.memory_gib}Gi",
        GPU_RESOURCE: str(node.gpus),
    }
    if node.efa_interfaces:
        amounts[EFA_RESOURCE] = str(node.efa_interfaces)
        amounts[HUGEPAGES_RESOURCE] = f"{node.hugepages_2mi_mib}Mi"
    return {"requests": dict(amounts), "limits": dict(amounts)}


def volumes(spec: JobSpec) -> list[dict[str, Any]]:
    storage = spec.checkpoint
    checkpoints: dict[str, Any] = (
        {"name": "checkpoints", "persistentVolumeClaim": {"claimName": storage.claim}}
        if storage.shared
        # One node only (config and job_spec see to that): every rank sees this directory, and it survives
        # torchrun's worker restarts and container restarts, but not the pod. Good for the dev stack, no more.
        else {"name": "checkpoints", "emptyDir": {}}
    )
    return [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{spec.node.shm_gib}Gi"}},
        checkpoints,
        {"name": "cache", "emptyDir": {}},  # hub downloads; on the node's root volume
    ]


def volume_mounts() -> list[dict[str, Any]]:
    return [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "checkpoints", "mountPath": CHECKPOINT_MOUNT},
        {"name": "cache", "mountPath": CACHE_MOUNT},
    ]


def prepare_checkpoints_container(spec: JobSpec) -> dict[str, Any]:
    """Shared file systems (FSx for Lustre, EFS) ignore fsGroup and start root-owned, so the non-root trainer could
    not create its run directory. This init container, the only root process in the pod, creates it and hands it
    to the trainer's user; it can do nothing else (all capabilities dropped but CHOWN). Its work stays here, out of
    the trainer's container, which must run without root and CHOWN.

    It never exits non-zero: the operator reads no init container's exit code (kubeflow/trainer v1.9.4,
    pkg/controller.v1/common/pod.go ReconcilePods takes 0xbeef, retryable under ExitCode), so a failure here, which
    would be for good (a read-only or full volume, root squashed by EFS so that chown is refused), would create the
    pod again without end. It says what failed in its log instead and exits 0; the launcher's staging, the first to
    write under the directory, then fails the job with exit 4 naming the directory (trainer/stage.py). Only a kill
    (a lost node) ends it otherwise, and a new pod is the cure for that."""
    run_dir = spec.checkpoint.run_directory
    owner = f"{TRAINER_UID}:{TRAINER_UID}"
    said = f"{PREPARE_CHECKPOINTS}: could not create {run_dir} for {owner}; the trainer will fail the job on it"
    script = f"mkdir -p {run_dir} && chown {owner} {run_dir} || echo '{said}' >&2"
    return {
        "name": PREPARE_CHECKPOINTS,
        "image": spec.image,
        "command": ["sh", "-c", script],
        "volumeMounts": [{"name": "checkpoints", "mountPath": CHECKPOINT_MOUNT}],
        "resources": {"requests": dict(INIT_RESOURCES), "limits": dict(INIT_RESOURCES)},
        "securityContext": {
            "runAsUser": 0,
            "runAsNonRoot": False,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]},
        },
    }


def metrics_port() -> dict[str, Any]:
    """The trainer's metrics endpoint, which the PodMonitor scrapes on every API's pod (a new dict each time: YAML
    would write one dict met twice in a document as an alias)."""
    return {"name": TRAINER_METRICS_PORT_NAME, "containerPort": TRAINER_METRICS_PORT, "protocol": "TCP"}


def trainer_container(spec: JobSpec, container: TrainerContainer) -> dict[str, Any]:
    return {
        "name": container.name,
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "command": list(container.command),
        "env": [*container_env(spec), *(dict(entry) for entry in container.env)],
        "ports": [dict(port) for port in container.ports],
        "resources": resources(spec),
        "volumeMounts": volume_mounts(),
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }


def worker_pod(spec: JobSpec, container: TrainerContainer, restart_policy: str | None = None) -> dict[str, Any]:
    """The worker pod: pinned to the stack's GPU node group and instance type, tolerating the GPU taint.
    `restart_policy`: the pod's own, where the API's controller needs one set (a TrainJob's Job); None leaves it
    to the controller (the Training Operator sets it from the replica's)."""
    pod_spec: dict[str, Any] = {
        # Its own service account: the one the Pod Identity association names (infra/trainer_access.py).
        "serviceAccountName": spec.service_account,
        "nodeSelector": {NODE_GROUP_LABEL: GPU_NODE_GROUP, INSTANCE_TYPE_LABEL: spec.node.instance_type},
        "tolerations": [
            {"key": GPU_TAINT_KEY, "operator": "Equal", "value": GPU_TAINT_VALUE, "effect": GPU_TAINT_EFFECT},
        ],
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": TRAINER_UID,
            "runAsGroup": TRAINER_UID,
            "fsGroup": TRAINER_UID,  # makes emptyDir and block volumes writable by the trainer's user
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
        "containers": [trainer_container(spec, container)],
        "volumes": volumes(spec),
    }
    if spec.checkpoint.shared:
        pod_spec["initContainers"] = [prepare_checkpoints_container(spec)]
    if restart_policy is not None:
        pod_spec["restartPolicy"] = restart_policy
    return {"metadata": {"labels": labels(spec)}, "spec": pod_spec}


def with_pod_image(pod: dict[str, Any], image: Any) -> None:
    """Every container of `pod` (a pod spec; init containers too) set to run `image`, in place."""
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        container["image"] = image


def with_artifacts_bucket(pod: dict[str, Any], bucket: Any) -> None:
    """Every container of `pod` (a pod spec) that names the artifacts bucket set to name `bucket`, in place: the
    stack's own bucket's name, a pulumi Output in the stack, or the local run's bucket."""
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        for variable in container.get("env", []):
            if variable["name"] == ARTIFACTS_BUCKET_VARIABLE:
                variable["value"] = bucket


def expand_references(value: str, env: dict[str, str]) -> str:
    """`value` (a command or args item) with Kubernetes' expansion of $(NAME) references from `env`, for a runner
    that starts the container's command itself (the local run); an undefined name stays as written, as in the
    kubelet."""

    return _REFERENCE.sub(lambda m: "$" if m.group(1) == "$" else env.get(m.group(2), m.group(0)), value)


def service_account_manifest(spec: JobSpec) -> dict[str, Any]:
    """The service account the job's pods run as. It carries no role annotation: EKS Pod Identity maps it to a role
    by an association on the cluster (infra/trainer_access.py), not by anything on the object."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": spec.service_account, "namespace": spec.namespace, "labels": labels(spec)},
    }


def namespace_manifest(spec: JobSpec) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": spec.namespace}}
