"""JobSpec: every decision about the training job, made once from the stack config and the instance catalog.

Pure and torch-free. Each job API (workloads/job/api.py) turns a JobSpec into Kubernetes objects; the job component
registers them; the render CLI, the local runner and the tests read the same objects.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, replace

from sizing.catalog import InstanceType
from sizing.host_memory import MIN_POD_RESERVED_GIB, POD_RESERVED_FRACTION
from sizing.throughput import expected_fabric
from stack.artifacts import artifacts_flag, run_key, stack_key
from stack.config import JobConfig, StackConfig
from stack.fit import checkpoint_timeout_minutes
from stack.job_api import STATIC_RDZV_BACKEND, disruption_restarts, rendezvous_backend
from stack.names import ETCD_CLIENT_PORT, ETCD_SERVICE_HOST, TRAINING_NAMESPACE, job_name
from stack.node_contract import EFA_HUGEPAGES_MIB  # the node's whole huge page pool: one training pod per node
from stack.trainer_config import job_s3_inputs, stack_trainer_config
from trainer.base.flags.config import TrainConfig
from workloads.job.pod_trainer_config import pod_trainer_config

# The claim a multi-node job mounts when job.checkpointClaim is unset; the job component creates it on the stack's
# FSx for Lustre file system when there is one (see docs/job.md).
DEFAULT_CHECKPOINT_CLAIM = "fsdp-checkpoints"
CHECKPOINT_MOUNT = "/checkpoints"
# The training operator's default port for the "pytorch" container; with c10d rendezvous, worker 0's agent hosts
# the store there, reached through the operator's headless per-pod Service (<job>-worker-0).
C10D_PORT = 23456
# Where a TrainJob's torchrun meets: Trainer v2's torch plugin sets PET_MASTER_PORT to 29500 and PET_MASTER_ADDR to
# node 0's host name in the JobSet's headless Service, "<job>-node-0-0.<job>" (kubeflow/trainer v2.3.0,
# pkg/runtime/framework/plugins/torch/torch.go, pkg/constants/constants.go ContainerTrainerPort).
TRAINJOB_MASTER_PORT = 29500
# torchrun's join timeout: the rendezvous waits this long for every node. Pulling a ~10 GB image onto 16 fresh
# nodes can take longer than torch's default of 600 s, and a node that misses the window restarts the round.
JOIN_TIMEOUT_S = 1800
# CPU and memory left to the kubelet, the system and the DaemonSets on a GPU node (VPC CNI, kube-proxy, EFA and
# NVIDIA device plugins, DCGM exporter, CSI node drivers): 10% of the node, and never less than 2 cores / 4 GiB,
# which the 4-vCPU dev node needs. 10% of memory also covers the huge page pool, which the kubelet subtracts from
# allocatable memory (about 10 GiB on nodes with at least 1152 GiB).
RESERVED_FRACTION = 0.10
MIN_RESERVED_CPUS = 2
# /dev/shm: NCCL's intra-node transport and DataLoader workers share tensors through it. It is tmpfs, charged to
# the pod's memory limit, so it is sized from the node's memory: an eighth, at most 64 GiB.
MAX_SHM_GIB = 64


@dataclass(frozen=True)
class NodeShape:
    """What one worker pod asks of its node: all of the node's GPUs and EFA interfaces, most of its CPU and RAM."""

    instance_type: str
    gpus: int
    efa_interfaces: int  # 0 when EFA is off or unsupported
    gpudirect_rdma: bool
    cpus: int
    memory_gib: int
    hugepages_2mi_mib: int  # 0 without EFA
    shm_gib: int
    peak_tflops: float  # dense bf16 per GPU, the trainer's MFU denominator


@dataclass(frozen=True)
class Rendezvous:
    backend: str  # torchrun's backend: etcd-v2 (the platform's etcd), c10d (a store on worker 0), static (TrainJob)
    host: str
    port: int
    join_timeout_s: int = JOIN_TIMEOUT_S

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class CheckpointVolume:
    """The volume the pods keep checkpoints on (a claim, or a pod's emptyDir) and this run's directory on it; the
    stack's checkpoint file system itself is infra/'s CheckpointStorage component."""

    claim: str | None  # a ReadWriteMany PVC; None means an emptyDir (one node only)
    run_directory: str  # this run's checkpoints, metrics and export, under CHECKPOINT_MOUNT
    # The stack makes the claim (DEFAULT_CHECKPOINT_CLAIM) on its FSx file system: no job.checkpointClaim of the user's.
    on_stack_file_system: bool = False

    @property
    def shared(self) -> bool:
        return self.claim is not None


@dataclass(frozen=True)
class HubTokenSource:
    """Where the pods read the Hugging Face token: an AWS Secrets Manager secret (job.hfTokenSecret, its name or ARN)
    in the stack's region, through the Pod Identity role of the job's service account (infra/hub_token_access.py)."""

    secret: str
    region: str


@dataclass(frozen=True)
class ArtifactsTarget:
    """Where the run keeps its durable artifacts (stack/artifacts.py) and what it reads from S3. The pods' role may
    write under `run_key` and read `inputs` (infra/trainer_access.py); the trainer's --artifacts-uri names the
    bucket through the container's variable (stack/names.py ARTIFACTS_BUCKET_VARIABLE), whose value is `bucket`, or,
    for the bucket the stack creates, its name once created (workloads/job/component.py)."""

    bucket: str | None  # artifacts.bucket as given; None: the stack's own bucket (infra/artifacts.py)
    stack_key: str  # <prefix>/<stack>/
    run_key: str  # <prefix>/<stack>/run-<n>/
    region: str  # the pods' AWS_REGION
    inputs: tuple[str, ...]  # the s3:// job.dataset, job.model and job.resumeFrom: read-only


def fabric_expectations(trainer: TrainConfig, instance: InstanceType, efa: bool) -> TrainConfig:
    """`trainer` with the bus bandwidth its fabric preflight compares each node with: what the sizing model assumes
    of the instance type (sizing/throughput.py expected_fabric), within a node when it has more than one GPU and
    across nodes on a rail when EFA carries it; 0 (unknown: only the median node is the reference) otherwise."""
    fabric = expected_fabric(instance)
    preflight = replace(
        trainer.preflight,
        expect_intra_gb_per_s=round(fabric.intra_gb_per_s or 0.0, 1) if instance.gpus > 1 else 0.0,
        expect_inter_gb_per_s=round(fabric.inter_rail_gb_per_s or 0.0, 1) if efa else 0.0,
    )
    return replace(trainer, preflight=preflight)


def trainer_service_account(name: str) -> str:
    """The service account the job's pods run as, in the training namespace: the one a Pod Identity association
    gives the token's read role to (a name of the job's own, never the namespace's `default`)."""
    return f"{name}-trainer"


@dataclass(frozen=True)
class JobSpec:
    """The training job of one stack and run. Build it with `job_spec`."""

    name: str
    namespace: str
    stack: str
    api: str  # pytorchjob or trainjob (stack/job_api.py)
    run: int
    image: str
    nodes: int
    min_nodes: int
    max_restarts: int
    max_disruption_restarts: int  # a TrainJob's uncounted gang restarts beyond which it fails (stack/job_api.py)
    node: NodeShape
    rendezvous: Rendezvous
    trainer: TrainConfig  # what every worker's trainer runs with; its flags are trainer.base.flags.config.to_argv of it
    checkpoint: CheckpointVolume
    nccl_debug: str
    distributed_debug: str
    service_account: str  # the pods' (trainer_service_account)
    hub_token: HubTokenSource | None  # None: the stack names no secret, and the pods read no token
    artifacts: ArtifactsTarget
    rendezvous_id: str = ""  # filled in by job_spec from everything above


def job_spec(config: StackConfig, image: str | None = None) -> JobSpec:
    """The job for a validated stack config. `image` is the pushed image (the stack knows it once built); without
    it, job.image, or else the repository and content tag the stack would build (read from the source tree)."""
    job, gpu = config.job, config.gpu_nodes
    name = job_name(config.stack)
    run_directory = f"{CHECKPOINT_MOUNT}/{name}/run-{job.run}"
    node = node_shape(gpu.instance, efa=gpu.efa_enabled)
    artifacts = config.artifacts
    trainer = stack_trainer_config(
        job, checkpoint_timeout_minutes(config), artifacts, artifacts_flag(artifacts.prefix, config.stack, job.run)
    )
    spec = JobSpec(
        name=name,
        namespace=TRAINING_NAMESPACE,
        stack=config.stack,
        api=job.api,
        run=job.run,
        image=image or job.image or _unpushed_image(config.stack),
        nodes=gpu.count,
        min_nodes=config.fewest_nodes,
        max_restarts=job.max_restarts,
        max_disruption_restarts=disruption_restarts(job.max_disruption_restarts, gpu.count),
        node=node,
        rendezvous=_rendezvous(job, name),
        trainer=fabric_expectations(
            pod_trainer_config(trainer, run_directory, node.peak_tflops), gpu.instance, gpu.efa_enabled
        ),
        checkpoint=CheckpointVolume(
            # The stack's FSx file system when it has one (also on one node: checkpoints then outlive the node);
            # a pod-local emptyDir only without it, which the config allows on a single node alone.
            claim=job.checkpoint_claim or (DEFAULT_CHECKPOINT_CLAIM if config.storage.fsx else None),
            run_directory=run_directory,
            on_stack_file_system=job.checkpoint_claim is None and bool(config.storage.fsx),
        ),
        nccl_debug=job.nccl_debug,
        distributed_debug=job.distributed_debug,
        service_account=trainer_service_account(name),
        hub_token=HubTokenSource(job.hf_token_secret, config.region) if job.hf_token_secret else None,
        artifacts=ArtifactsTarget(
            bucket=artifacts.bucket,
            stack_key=stack_key(artifacts.prefix, config.stack),
            run_key=run_key(artifacts.prefix, config.stack, job.run),
            region=config.region,
            inputs=job_s3_inputs(job),
        ),
    )
    return dataclasses.replace(spec, rendezvous_id=rendezvous_id(spec))


def rendezvous_id(spec: JobSpec) -> str:
    """Unique to the run: the job's name, the run counter and a digest of everything else in the spec. The same
    spec always gets the same id (a render matches the deployed job); a new run, or a changed job, gets a new one,
    so torchrun never joins the closed rendezvous a finished run left in etcd (RendezvousClosedError)."""
    fields = dataclasses.asdict(dataclasses.replace(spec, rendezvous_id=""))
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:12]
    return f"{spec.name}-run{spec.run}-{digest}"


def supports_gpudirect_rdma(instance: InstanceType) -> bool:
    """EFA reads and writes GPU memory directly (FI_EFA_USE_DEVICE_RDMA) where the catalog says so."""
    return instance.supports_efa and instance.gpudirect_rdma


def node_shape(instance: InstanceType, efa: bool) -> NodeShape:
    reserved_cpus = max(MIN_RESERVED_CPUS, round(instance.vcpus * RESERVED_FRACTION))
    # The same reserve the host-memory sizing leaves the node (sizing/host_memory.py), so its budget is this pod's.
    reserved_memory = max(MIN_POD_RESERVED_GIB, round(instance.memory_gib * POD_RESERVED_FRACTION))
    return NodeShape(
        instance_type=instance.name,
        gpus=instance.gpus,
        efa_interfaces=instance.efa_interfaces if efa else 0,
        gpudirect_rdma=efa and supports_gpudirect_rdma(instance),
        cpus=instance.vcpus - reserved_cpus,
        memory_gib=instance.memory_gib - reserved_memory,
        hugepages_2mi_mib=EFA_HUGEPAGES_MIB if efa else 0,
        shm_gib=min(MAX_SHM_GIB, max(1, instance.memory_gib // 8)),
        peak_tflops=instance.peak_bf16_flops_per_gpu / 1e12,
    )


def _rendezvous(job: JobConfig, name: str) -> Rendezvous:
    backend = rendezvous_backend(job.api, job.rdzv_backend)
    if backend == STATIC_RDZV_BACKEND:
        # The JobSet's first replicated job is "node"; its Job "<job>-node-0" runs pod index 0 with that host name.
        return Rendezvous(STATIC_RDZV_BACKEND, f"{name}-node-0-0.{name}", TRAINJOB_MASTER_PORT)
    if backend == "etcd":
        # etcd-v2 is torchrun's current etcd backend (the dynamic rendezvous over etcd's v2 API); plain "etcd" is
        # the legacy implementation.
        return Rendezvous("etcd-v2", ETCD_SERVICE_HOST, ETCD_CLIENT_PORT)
    return Rendezvous("c10d", f"{name}-worker-0", C10D_PORT)


def _unpushed_image(stack: str) -> str:
    from workloads.job.image_source import unpushed_image_reference  # reads the source tree; only when needed

    return unpushed_image_reference(stack)
