"""The training job as Kubernetes objects: a kubeflow.org/v1 PyTorchJob running torchrun (through the trainer's
launcher, trainer/launch/launcher.py), its namespace and the service account its pods run as. No object holds the
Hugging Face token: the pods name the Secrets Manager secret and read it themselves (trainer/launch/hub_token.py).

Pure functions of a JobSpec (workloads/job/spec.py) returning plain dicts. The job component registers them, the
render CLI prints them, the local runner executes the same container command, and the tests check them.

    spec = job_spec(load_stack_config("p5-16"))
    manifest = pytorchjob_manifest(spec)
"""

from __future__ import annotations

import copy
from typing import Any

from stack.config import StackConfig
from stack.file_system import LustreFileSystem
from stack.names import (
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
from trainer.config import to_argv
from trainer.launch.exits import LAUNCH_MODULE, PERMANENT_EXITS
from trainer.launch.hub_token import REGION_VARIABLE, SECRET_VARIABLE
from trainer.launch.stage import STAGE_INPUTS_OPTION
from workloads.job.shutdown import TERMINATION_GRACE_S, torchrun_shutdown_timeout
from workloads.job.spec import CHECKPOINT_MOUNT, JobSpec, job_spec
from workloads.job.staging import worker_env

__all__ = [
    "CONTAINER_PERMANENT_EXITS",
    "JobSpec",
    "checkpoint_volume_objects",
    "hub_token_env",
    "job_objects",
    "job_spec",
    "launcher_command",
    "namespace_manifest",
    "pytorchjob_manifest",
    "service_account_manifest",
    "trainer_args",
    "with_image",
]

# The training operator injects its PET_* rendezvous variables into the container of this name only.
CONTAINER_NAME = "pytorch"
TRAINER_UID = 1000  # the image's non-root user (docker/Dockerfile)
CACHE_MOUNT = "/cache"
# What the training operator does when a worker's container exits (kubeflow/trainer v1.9.4,
# pkg/controller.v1/common/pod.go ReconcilePods, pkg/util/train/train_util.go IsRetryableExitCode): with ExitCode
# it gives the pod restartPolicy Never (pkg/core/pod.go SetRestartPolicy), creates the pod again when the code is
# 128 or more and fails the whole job on 1 to 127. The launcher ends on exactly these terms (trainer/launch/launcher.py,
# the codes in trainer/launch/exits.py): 128 + the signal after SIGTERM (a pod deleted, evicted or drained; torchrun has
# passed it to the workers, which settle their checkpoint first) and EXIT_BACKEND_LOST after a lost rendezvous
# backend (an etcd restart) are created again; 1 once torchrun's --max-restarts are spent, when it closes the
# rendezvous on its way out, fails the job. OnFailure would restart that container in place, into the closed rendezvous
# (RendezvousClosedError), until the restarts of all pods together passed backoffLimit. The operator reads the code of
# the `pytorch` container only; a pod failed by an init container reads as 0xbeef, retryable, so no init container of
# this pod may fail for good (CONTAINER_PERMANENT_EXITS; staging runs in the launcher for that reason).
RESTART_POLICY = "ExitCode"
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
# The exit codes each container of the worker pod ends with on a failure that no new pod cures (local/restart_policy.py
# recreation_loops runs every one through the operator's rule; a container not named here is taken to have any).
# The launcher's are final for the operator: it reads them from this container. prepare-checkpoints has none: it
# cannot exit non-zero (prepare_checkpoints_container says why), so only a kill, which a new pod may cure, ends it.
CONTAINER_PERMANENT_EXITS: dict[str, tuple[int, ...]] = {CONTAINER_NAME: PERMANENT_EXITS, PREPARE_CHECKPOINTS: ()}


def trainer_args(spec: JobSpec) -> list[str]:
    """`python -m trainer` flags: the spec's TrainConfig as the trainer's own parser reads it back."""
    return to_argv(spec.trainer)


def launcher_command(spec: JobSpec) -> list[str]:
    """`python -m trainer.launch` with torchrun's elastic launch spelled out: the launcher runs torchrun in its own
    process, the container's main one, and maps how it ended onto RESTART_POLICY's two classes. The operator also
    sets the same values as PET_* variables; explicit flags make the command complete on its own, for `kubectl
    describe` and for the local runner. torchrun's default --signals-to-handle includes SIGTERM, which the launcher
    needs: torchrun passes it to the workers and waits --shutdown-timeout for them."""
    r = spec.rendezvous
    return [
        PYTHON,
        "-m",
        LAUNCH_MODULE,
        STAGE_INPUTS_OPTION,  # the launcher's own: staging first, in this container (workloads/job/staging.py)
        f"--nnodes={spec.min_nodes}:{spec.nodes}",
        f"--nproc-per-node={spec.node.gpus}",
        f"--rdzv-backend={r.backend}",
        f"--rdzv-endpoint={r.endpoint}",
        f"--rdzv-id={spec.rendezvous_id}",
        f"--rdzv-conf=join_timeout={r.join_timeout_s}",
        f"--max-restarts={spec.max_restarts}",
        f"--shutdown-timeout={torchrun_shutdown_timeout(TERMINATION_GRACE_S)}",  # SIGTERM to SIGKILL of the workers
        "-m",
        "trainer",
        *trainer_args(spec),
    ]


def labels(spec: JobSpec) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "fsdp-trainer",
        **PART_OF,
        STACK_LABEL: spec.stack,
        "fsdp-eks/run": str(spec.run),
        COMPONENT_LABEL: TRAINER_COMPONENT,
    }


def network_env(spec: JobSpec) -> list[dict[str, Any]]:
    """NCCL and libfabric settings for the node type, plus the diagnostic switches from config."""
    env = [
        {"name": "NCCL_DEBUG", "value": spec.nccl_debug},
        {"name": "TORCH_DISTRIBUTED_DEBUG", "value": spec.distributed_debug},
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
    """Where the launcher reads the Hugging Face token (trainer/launch/hub_token.py): the secret's name or ARN and the
    region to call, when the stack names a secret; nothing otherwise (public models and the synthetic data set need
    no token, and the config check refuses a gated model without a secret). Neither value is secret."""
    if spec.hub_token is None:
        return []
    return [
        {"name": SECRET_VARIABLE, "value": spec.hub_token.secret},
        {"name": REGION_VARIABLE, "value": spec.hub_token.region},
    ]


def container_env(spec: JobSpec) -> list[dict[str, Any]]:
    return [
        *hub_token_env(spec),
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
        "nvidia.com/gpu": str(node.gpus),
    }
    if node.efa_interfaces:
        amounts["vpc.amazonaws.com/efa"] = str(node.efa_interfaces)
        amounts["hugepages-2Mi"] = f"{node.hugepages_2mi_mib}Mi"
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


def trainer_container(spec: JobSpec) -> dict[str, Any]:
    return {
        "name": CONTAINER_NAME,
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "command": launcher_command(spec),
        "env": container_env(spec),
        "ports": [
            {"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"},
            {"name": TRAINER_METRICS_PORT_NAME, "containerPort": TRAINER_METRICS_PORT, "protocol": "TCP"},
        ],
        "resources": resources(spec),
        "volumeMounts": volume_mounts(),
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }


def pod_template(spec: JobSpec) -> dict[str, Any]:
    """The worker pod: pinned to the stack's GPU node group and instance type, tolerating the GPU taint."""
    pod_spec: dict[str, Any] = {
        # Its own service account: the one the token's Pod Identity association names (infra/hub_token_access.py).
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
        "containers": [trainer_container(spec)],
        "volumes": volumes(spec),
    }
    if spec.checkpoint.shared:
        pod_spec["initContainers"] = [prepare_checkpoints_container(spec)]
    return {"metadata": {"labels": labels(spec)}, "spec": pod_spec}


def pytorchjob_manifest(spec: JobSpec) -> dict[str, Any]:
    """The kubeflow.org/v1 PyTorchJob: `nodes` workers, each one torchrun agent over all of its node's GPUs."""
    r = spec.rendezvous
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": spec.name, "namespace": spec.namespace, "labels": labels(spec)},
        "spec": {
            "nprocPerNode": str(spec.node.gpus),
            "elasticPolicy": {
                "minReplicas": spec.min_nodes,
                "maxReplicas": spec.nodes,
                "maxRestarts": spec.max_restarts,
                "rdzvBackend": r.backend,
                "rdzvHost": r.host,
                "rdzvPort": r.port,
                "rdzvId": spec.rendezvous_id,
                "rdzvConf": [{"key": "join_timeout", "value": str(r.join_timeout_s)}],
            },
            "runPolicy": {
                # Delete pods still running when the job ends; keep finished ones for `kubectl logs`. No
                # ttlSecondsAfterFinished: Pulumi owns the object, and a TTL deletion would make the next
                # `pulumi up` create it again and rerun the training.
                "cleanPodPolicy": "Running",
                # Under ExitCode the operator (v1.9.4, pkg/controller.v1/common/job.go) applies backoffLimit only
                # when it is 0: then a pod killed by a signal fails the job too, as maxRestarts 0 asks.
                "backoffLimit": spec.max_restarts,
            },
            "pytorchReplicaSpecs": {
                "Worker": {
                    "replicas": spec.nodes,
                    # A pod whose torchrun gave up fails the job; one stopped by a signal, or whose rendezvous
                    # backend was lost, is created again.
                    "restartPolicy": RESTART_POLICY,
                    "template": pod_template(spec),
                },
            },
        },
    }


def with_image(manifest: dict[str, Any], image: Any) -> dict[str, Any]:
    """A copy of the PyTorchJob with every container (init containers too) running `image`: the pushed image, which
    the stack learns only after the build (a pulumi Output there)."""
    result = copy.deepcopy(manifest)
    for replica in result["spec"]["pytorchReplicaSpecs"].values():
        pod = replica["template"]["spec"]
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            container["image"] = image
    return result


def service_account_manifest(spec: JobSpec) -> dict[str, Any]:
    """The service account the job's pods run as. It carries no role annotation: EKS Pod Identity maps it to a role
    by an association on the cluster (infra/hub_token_access.py), not by anything on the object."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": spec.service_account, "namespace": spec.namespace, "labels": labels(spec)},
    }


def namespace_manifest(spec: JobSpec) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": spec.namespace}}


def job_objects(config: StackConfig, image: str | None = None) -> list[dict[str, Any]]:
    """Every Kubernetes object of the stack's job, for the render CLI: the namespace, the pods' service account and
    the PyTorchJob. Empty when job.enabled is false."""
    if not config.job.enabled:
        return []
    spec = job_spec(config, image)
    return [namespace_manifest(spec), service_account_manifest(spec), pytorchjob_manifest(spec)]


def checkpoint_volume_objects(spec: JobSpec, fs: LustreFileSystem[str]) -> list[dict[str, Any]]:
    """A statically provisioned PersistentVolume on `fs` through the FSx CSI driver, and the claim the job mounts.
    Static provisioning needs only the driver on the nodes, no StorageClass; Retain keeps the checkpoints when the
    job (and its claim) is replaced."""
    claim = spec.checkpoint.claim
    volume_name = f"{claim}-{spec.stack}".lower()[:63].rstrip("-")
    size = f"{fs.capacity_gib}Gi"
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": volume_name, "labels": labels(spec)},
        "spec": {
            "capacity": {"storage": size},
            "volumeMode": "Filesystem",
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "mountOptions": ["flock"],
            "csi": {
                "driver": "fsx.csi.aws.com",
                "volumeHandle": fs.file_system_id,
                "volumeAttributes": {"dnsname": fs.dns_name, "mountname": fs.mount_name},
            },
        },
    }
    claim_object = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim, "namespace": spec.namespace, "labels": labels(spec)},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": volume_name,
            "resources": {"requests": {"storage": size}},
        },
    }
    return [volume, claim_object]
