"""The stack's config as typed, validated dataclasses, with every default applied here in code.

Pulumi applies the defaults declared in Pulumi.yaml only when its CLI runs; under test mocks, in the render CLI
and in the local run nothing does, so this module is the one place defaults live (a test keeps Pulumi.yaml in
step). Every problem is collected and raised as one ConfigError before any resource is registered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sizing.catalog import CATALOG, InstanceType
from sizing.fsx import (
    DEFAULT_FSX_CAPACITY_GIB,
    DEFAULT_FSX_THROUGHPUT_PER_TIB,
    FSX_THROUGHPUT_PER_TIB,
    fsx_capacity_problem,
)
from stack.artifacts import DEFAULT_PREFIX, prefix_problem
from stack.fields import (
    at_least,
    between,
    job_option,
    one_of,
    one_of_ints,
    setting,
)
from stack.hub_token_secret import secret_reference_problem
from stack.job_api import DEFAULT_JOB_API, DEFAULT_RDZV_BACKEND, JOB_APIS, RDZV_BACKENDS
from stack.names import CLUSTER_NAME_PREFIX
from stack.versions import EKS_SUPPORT_ENDS
from trainer.base.errors import InputError
from trainer.base.s3.uri import S3Uri, bucket_name_problem, checkpoint_bucket_problem, is_s3_uri

CAPACITY_TYPES = ("ON_DEMAND", "CAPACITY_BLOCK", "SPOT")
ALL_CONTROL_PLANE_LOGS = ["api", "audit", "authenticator", "controllerManager", "scheduler"]

# EC2 capacity reservation ids (ODCRs and capacity blocks alike): "cr-" and 17 hex digits.
CAPACITY_RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{17}$")
VPC_ID = re.compile(r"^vpc-[0-9a-f]{8}([0-9a-f]{9})?$")
SUBNET_ID = re.compile(r"^subnet-[0-9a-f]{8}([0-9a-f]{9})?$")
IAM_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
IAM_POLICY_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:policy/[\w+=,.@/-]+$")
REGION = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d$")
# Kubernetes object names (RFC 1123 subdomain), such as a PersistentVolumeClaim's.
DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# EKS versions this project is tested against (stack/versions.py, with their support dates); the newest is the default.
KUBERNETES_VERSIONS = tuple(EKS_SUPPORT_ENDS)
# The retention periods CloudWatch Logs accepts, in days (CloudWatch Logs API reference, PutRetentionPolicy).
LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)


def s3_uri_problem(value: str) -> str | None:
    """What an s3:// value must be (trainer/base/s3/uri.py S3Uri.parse), or None; anything else is not checked here."""
    if not is_s3_uri(value):
        return None
    try:
        S3Uri.parse(value, "the URI")
    except InputError as error:
        return f"a well-formed s3://bucket/key URI ({error})"
    return None


def required_s3_uri_problem(value: str) -> str | None:
    return s3_uri_problem(value) if is_s3_uri(value) else "an s3://bucket/key URI"


def checkpoint_uri_problem(value: str) -> str | None:
    """An s3:// URI of checkpoints: well formed, in a bucket the checkpoints' client reaches."""
    problem = required_s3_uri_problem(value)
    if problem is None:
        dots = checkpoint_bucket_problem(S3Uri.parse(value).bucket)
        problem = f"a bucket without dots ({dots})" if dots else None
    return problem


def artifacts_bucket_problem(bucket: str) -> str | None:
    if bucket_name_problem(bucket) is not None:
        return "an S3 bucket name (S3's naming rules)"
    dots = checkpoint_bucket_problem(bucket)
    return f"a bucket without dots ({dots})" if dots else None


# EC2 placement group names: up to 255 ASCII characters (EC2 API reference, CreatePlacementGroup).
PLACEMENT_GROUP_NAME = re.compile(r"^[\x20-\x7e]{1,255}$")


@dataclass(frozen=True)
class NetworkConfig:
    cidr: str = setting("cidr", "10.0.0.0/16", "IPv4 CIDR of the new VPC.")
    availability_zones: list[str] = setting(
        "availabilityZones", [], "AZs of the new VPC (at least 2); default: the region's a and b.", factory=True
    )
    private_subnet_prefix: int = setting(
        "privateSubnetPrefix", 19, "Prefix length of each private subnet (nodes and pods live here).", between(16, 28)
    )
    public_subnet_prefix: int = setting(
        "publicSubnetPrefix", 22, "Prefix length of each public subnet (NAT gateways, load balancers).", between(16, 28)
    )
    nat_gateways: str = setting(
        "natGateways",
        "single",
        "One NAT gateway for the VPC, or one per AZ for AZ-independent egress.",
        one_of("single", "perAz"),
    )
    vpc_id: str | None = setting("vpcId", None, "Use this existing VPC instead of creating one.")
    private_subnet_ids: list[str] = setting(
        "privateSubnetIds", [], "With vpcId: the private subnets for the cluster (at least 2 AZs).", factory=True
    )
    public_subnet_ids: list[str] = setting(
        "publicSubnetIds", [], "With vpcId: public subnets (optional; for public load balancers).", factory=True
    )
    gpu_subnet_id: str | None = setting(
        "gpuSubnetId", None, "With vpcId: the private subnet, in gpuNodes.availabilityZone, for the GPU nodes."
    )

    @property
    def uses_existing_vpc(self) -> bool:
        return self.vpc_id is not None


@dataclass(frozen=True)
class ClusterConfig:
    name: str | None = setting("name", None, "EKS cluster name; default: fsdp-eks-<stack>.")
    kubernetes_version: str = setting(
        "kubernetesVersion",
        KUBERNETES_VERSIONS[-1],
        "EKS Kubernetes version; preview warns, with the dates, of one past EKS standard support (extended support is "
        "billed extra) and refuses one past extended support.",
        one_of(*KUBERNETES_VERSIONS),
    )
    endpoint_public_access: bool = setting(
        "endpointPublicAccess",
        False,
        "Whether the API endpoint is reachable from outside the VPC, from publicAccessCidrs (private access is always "
        "on). Preview refuses a new cluster that the machine deploying it cannot reach (docs/aws.md, 'API endpoint "
        "access').",
    )
    public_access_cidrs: list[str] = setting(
        "publicAccessCidrs",
        [],
        "With endpointPublicAccess: your own networks' CIDRs that may reach the API endpoint; a CIDR open to the "
        "whole internet is refused.",
        factory=True,
    )
    private_access_cidrs: list[str] = setting(
        "privateAccessCidrs",
        [],
        "Networks inside the VPC or routed to it (a VPN, a peered VPC, a CI runner in the VPC) admitted to the private "
        "API endpoint on port 443; a new cluster is reached this way only in an existing VPC (network.vpcId).",
        factory=True,
    )
    admin_role_arns: list[str] = setting(
        "adminRoleArns", [], "IAM roles given cluster-admin through EKS access entries.", factory=True
    )
    creator_role_arn: str | None = setting(
        "creatorRoleArn",
        None,
        "The IAM role that creates (or created) the cluster: the first pulumi up's role, in CI the deploy role. EKS "
        "gives it a cluster-admin access entry itself, so the stack makes none for it, even if adminRoleArns lists it.",
        lambda arn: None if IAM_ROLE_ARN.match(arn) else "an IAM role ARN such as arn:aws:iam::123456789012:role/Admin",
    )
    control_plane_logs: list[str] = setting(
        "controlPlaneLogs", ALL_CONTROL_PLANE_LOGS, "Control-plane log types sent to CloudWatch.", factory=True
    )
    control_plane_log_retention_days: int = setting(
        "controlPlaneLogRetentionDays",
        30,
        "Days CloudWatch keeps control-plane logs (the stack owns their log group).",
        one_of_ints(*LOG_RETENTION_DAYS),
    )
    system_node_instance_type: str = setting(
        "systemNodeInstanceType", "m6i.2xlarge", "Instance type of the CPU node group for controllers and monitoring."
    )
    system_node_count: int = setting("systemNodeCount", 2, "Nodes in the CPU system node group.", between(1, 20))
    existing: bool = setting(
        "existing",
        False,
        "Use an existing cluster instead of creating one, reached through its name and the caller's AWS identity (aws "
        "eks get-token); the stack needs no kubeconfig.",
    )
    role_permissions_boundary: str | None = setting(
        "rolePermissionsBoundary",
        None,
        "IAM policy ARN set as the permissions boundary of every IAM role the stack creates (pulumi-eks's too); "
        "the CI deploy role only creates roles that carry it (docs/ci.md).",
    )

    @property
    def deployed_by_ci(self) -> bool:
        """The CI deploy role creates roles only with its boundary, so a stack that names one is deployed by CI."""
        return bool(self.role_permissions_boundary)


@dataclass(frozen=True)
class GpuNodesConfig:
    instance_type: str = setting(
        "instanceType", "p5.48xlarge", "GPU instance type (one of the catalog's).", one_of(*CATALOG)
    )
    count: int = setting("count", 2, "Number of GPU nodes.", at_least(0))
    availability_zone: str | None = setting(
        "availabilityZone",
        None,
        "The one AZ of the GPU nodes; default: the first network AZ. Must be the "
        "reservation's AZ when capacityReservationId is set.",
    )
    capacity_type: str = setting("capacityType", "ON_DEMAND", "How the nodes are bought.", one_of(*CAPACITY_TYPES))
    capacity_reservation_id: str | None = setting(
        "capacityReservationId", None, "ODCR or capacity block id (cr-...) the nodes launch into."
    )
    efa: bool | None = setting(
        "efa", None, "One EFA interface per network card; default: on wherever the type supports EFA."
    )
    placement_group: str = setting(
        "placementGroup",
        "auto",
        "Cluster placement group: auto (on unless a reservation fixes placement), always, never.",
        one_of("auto", "always", "never"),
    )
    placement_group_name: str | None = setting(
        "placementGroupName",
        None,
        "An existing cluster placement group to launch into, such as the one an ODCR was made in; the stack "
        "then makes none.",
    )
    root_volume_gib: int = setting(
        "rootVolumeGiB", 500, "gp3 root volume per node (container images, logs).", at_least(100)
    )
    price_per_hour: float | None = setting(
        "pricePerHour",
        None,
        "Your price per node-hour in USD (a reservation's or a savings plan's); default: the on-demand price AWS's "
        "Price List API gives at preview, or the catalog's dated list price where it cannot be read.",
    )
    spares: int = setting(
        "spares",
        1,
        "GPU nodes the cluster autoscaler may add beyond count, in place of a node the job took out of service (the "
        "launcher's bad-node taint) or lost; a spare bills only while a pod waits for it, then the emptied node goes.",
        between(0, 8),
    )
    keep_idle_nodes: bool | None = setting(
        "keepIdleNodes",
        None,
        "Keep count GPU nodes when no job runs; default: true with a capacityReservationId (a reservation bills "
        "whether used or not), else false: the cluster autoscaler removes idle GPU nodes after the job ends and adds "
        "them back when a job's pods wait (docs/aws.md, 'Idle GPU nodes').",
    )
    auto_repair: bool = setting(
        "autoRepair",
        True,
        "EKS node auto repair: a node the node monitoring agent (or the kubelet) reports unhealthy is rebooted or "
        "replaced (docs/aws.md, 'Bad nodes').",
    )

    @property
    def instance(self) -> InstanceType:
        return CATALOG[self.instance_type]

    @property
    def efa_enabled(self) -> bool:
        return self.instance.supports_efa if self.efa is None else self.efa

    @property
    def uses_placement_group(self) -> bool:
        """Whether the stack creates a cluster placement group for the nodes."""
        # A cluster placement group on top of an ODCR or a capacity block makes launches fail with
        # InsufficientInstanceCapacity: the reservation already fixes where the instances go. An ODCR made in a
        # placement group is used through that group (placementGroupName) instead.
        if self.placement_group_name is not None:
            return False
        if self.placement_group == "auto":
            return self.capacity_reservation_id is None
        return self.placement_group == "always"

    @property
    def reserved_capacity(self) -> bool:
        """Whether the nodes launch into a reservation (ODCR or capacity block) sized for them: no spare instances
        for a rolling update to surge into."""
        return self.capacity_reservation_id is not None

    @property
    def keeps_idle_nodes(self) -> bool:
        return self.reserved_capacity if self.keep_idle_nodes is None else self.keep_idle_nodes


@dataclass(frozen=True)
class StorageConfig:
    fsx: bool | None = setting(
        "fsx",
        None,
        "An FSx for Lustre file system in the GPU nodes' AZ for checkpoints, shared by every node; default: on "
        "for a new cluster, off (none is made) with cluster.existing.",
    )
    fsx_capacity_gib: int = setting(
        "fsxCapacityGiB",
        DEFAULT_FSX_CAPACITY_GIB,
        "FSx for Lustre capacity: 1200, or a multiple of 2400 (PERSISTENT_2 sizes).",
        fsx_capacity_problem,
    )
    fsx_throughput_per_tib: int = setting(
        "fsxThroughputPerTiB",
        DEFAULT_FSX_THROUGHPUT_PER_TIB,
        "FSx for Lustre MB/s per TiB of capacity.",
        one_of_ints(*FSX_THROUGHPUT_PER_TIB),
    )


@dataclass(frozen=True)
class MonitoringConfig:
    enabled: bool = setting("enabled", True, "Prometheus, Grafana and the DCGM exporter.")
    grafana: bool = setting("grafana", True, "Grafana with the project's dashboards.")
    grafana_load_balancer: bool = setting(
        "grafanaLoadBalancer",
        False,
        "Expose Grafana through an internet-facing load balancer (default: port-forward only).",
    )
    cloudwatch_observability: bool = setting(
        "cloudwatchObservability", False, "The Amazon CloudWatch Observability add-on (Container Insights GPU metrics)."
    )
    node_tools: bool = setting("nodeTools", False, "htop / nvtop DaemonSets on the GPU nodes for inspection.")
    prometheus_retention: str = setting("prometheusRetention", "15d", "How long Prometheus keeps samples.")
    prometheus_storage_gib: int = setting(
        "prometheusStorageGiB",
        50,
        "gp3 volume for Prometheus' samples (EBS CSI driver; on the stack's own cluster a system node per AZ); 0 "
        "keeps them in an emptyDir that a pod restart loses.",
        at_least(0),
    )


@dataclass(frozen=True)
class LoraSettings:
    """job.lora: the trainer's --lora-* flags."""

    rank: int = job_option("lora.rank")
    alpha: int = job_option("lora.alpha", at_least(1))
    targets: list[str] = job_option("lora.targets")


@dataclass(frozen=True)
class ValidationSettings:
    """job.validation: the trainer's --val-split, --val-dataset, --eval-every, --keep-best, --early-stop-patience."""

    split: float = job_option("validation.split")
    dataset: str | None = job_option("validation.dataset", s3_uri_problem)
    dataset_split: str | None = job_option("validation.datasetSplit")
    every: int = job_option("validation.every")
    keep_best: bool = job_option("validation.keepBest")
    early_stop_patience: int = job_option("validation.earlyStopPatience")


@dataclass(frozen=True)
class JobConfig:
    enabled: bool = setting("enabled", True, "Run the training job (see job.api) as part of the stack.")
    model: str = job_option("model", s3_uri_problem)
    hf_token_secret: str | None = setting(
        "hfTokenSecret",
        None,
        "Name or ARN of the AWS Secrets Manager secret (in the stack's region) whose SecretString is the Hugging Face "
        "token, needed for gated models such as Llama 2; the job's pods read it at start through their own Pod "
        "Identity role. The stack never holds the token.",
        secret_reference_problem,
    )
    dataset: str = job_option("dataset", s3_uri_problem)
    dataset_format: str = job_option("datasetFormat")
    sharding_strategy: str = job_option("shardingStrategy")
    mixed_precision: str = job_option("mixedPrecision")
    activation_checkpointing: str = job_option("activationCheckpointing")
    compile: bool = job_option("compile")
    all_reduce_dtype: str = job_option("allReduceDtype")
    lora: LoraSettings = setting(
        "lora",
        LoraSettings(),
        "LoRA instead of full fine-tuning: a map of rank, alpha, targets (job.lora.rank > 0 turns it on).",
    )
    validation: ValidationSettings = setting(
        "validation",
        ValidationSettings(),
        "Validation while fine-tuning: a map of split or dataset, every, keepBest, earlyStopPatience.",
    )
    seq_len: int = job_option("seqLen")
    batch_size: int = job_option("batchSize")
    global_batch_size: int | None = job_option("globalBatchSize")
    steps: int = job_option("steps")
    learning_rate: float = job_option("learningRate")
    checkpoint_every: int = job_option("checkpointEvery", at_least(1))
    resume_from: str | None = job_option("resumeFrom", checkpoint_uri_problem)
    api: str = setting(
        "api",
        DEFAULT_JOB_API,
        "Job API: pytorchjob (Training Operator v1, elastic, etcd or c10d rendezvous) or trainjob (Kubeflow Trainer "
        "v2 on JobSet, static rendezvous on node 0, whole-gang restarts).",
        one_of(*JOB_APIS),
    )
    rdzv_backend: str | None = setting(
        "rdzvBackend",
        None,
        f"torchrun rendezvous of a pytorchjob: the platform's etcd, or c10d; default: {DEFAULT_RDZV_BACKEND}. "
        "Unset with trainjob.",
        one_of(*RDZV_BACKENDS),
    )
    max_restarts: int = setting(
        "maxRestarts",
        3,
        "Restarts after a failure: torchrun's of the worker group (pytorchjob), JobSet's of the whole gang (trainjob).",
        at_least(0),
    )
    max_disruption_restarts: int | None = setting(
        "maxDisruptionRestarts",
        None,
        "Whole-gang restarts of a trainjob that maxRestarts does not count (drains, evictions, a NotReady node's pods "
        "deleted: DisruptionTarget), beyond which the next start fails the job; default: twice gpuNodes.count, at "
        "least 10. Unset with pytorchjob.",
        at_least(0),
    )
    min_nodes: int | None = setting(
        "minNodes",
        None,
        "Fewest nodes an elastic pytorchjob runs on after losing some; default: all of them. Unset with trainjob.",
    )
    run: int = setting("run", 1, "Run counter: bump it to start a fresh run with a fresh rendezvous.", at_least(1))
    image: str | None = setting("image", None, "Trainer image; default: built and pushed to the stack's ECR.")
    checkpoint_claim: str | None = setting(
        "checkpointClaim",
        None,
        "ReadWriteMany PVC in the training namespace for checkpoints (FSx for Lustre "
        "recommended). Default: an emptyDir on one node; on more nodes, the claim fsdp-checkpoints, which the job "
        "creates on the stack's FSx file system when it has one.",
    )
    nccl_debug: str = setting(
        "ncclDebug",
        "WARN",
        "NCCL_DEBUG: INFO shows the transport (NET/OFI = EFA) per rank.",
        one_of("VERSION", "WARN", "INFO", "TRACE"),
    )
    distributed_debug: str = setting(
        "distributedDebug",
        "OFF",
        "TORCH_DISTRIBUTED_DEBUG: DETAIL checks collectives match across ranks (slow).",
        one_of("OFF", "INFO", "DETAIL"),
    )


@dataclass(frozen=True)
class ArtifactsConfig:
    bucket: str | None = setting(
        "bucket",
        None,
        "An existing S3 bucket, in the stack's region and without dots in its name, for the runs' checkpoints and "
        "final models: used as it is, "
        "never created, changed or deleted by the stack. Default: a bucket the stack creates (versioned, encrypted, "
        "private), which pulumi destroy keeps.",
        artifacts_bucket_problem,
    )
    prefix: str = setting(
        "prefix",
        DEFAULT_PREFIX,
        "Key prefix in the bucket: each run writes under <prefix>/<stack>/run-<job.run>/.",
        prefix_problem,
    )
    checkpoint_every: int | None = setting(
        "checkpointEvery",
        None,
        "Steps between the checkpoints that also go to S3 (a multiple of job.checkpointEvery; the last step's always "
        "does); default: every checkpoint.",
        at_least(1),
    )


@dataclass(frozen=True)
class StackConfig:
    """Everything the program needs, validated. Built by `parse_stack_config` (stack/parse.py)."""

    stack: str
    region: str
    network: NetworkConfig = field(default_factory=NetworkConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    gpu_nodes: GpuNodesConfig = field(default_factory=GpuNodesConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)
    monitoring: MonitoringConfig = field(default_factory=MonitoringConfig)
    job: JobConfig = field(default_factory=JobConfig)
    artifacts: ArtifactsConfig = field(default_factory=ArtifactsConfig)

    @property
    def cluster_name(self) -> str:
        return self.cluster.name or f"{CLUSTER_NAME_PREFIX}{self.stack}"

    @property
    def availability_zones(self) -> list[str]:
        return self.network.availability_zones or [f"{self.region}a", f"{self.region}b"]

    @property
    def gpu_availability_zone(self) -> str:
        return self.gpu_nodes.availability_zone or self.availability_zones[0]

    @property
    def fewest_nodes(self) -> int:
        """The fewest nodes the job runs on: an elastic job (job.minNodes) may go on with fewer than gpuNodes.count,
        and then every GPU holds a larger shard."""
        return self.job.min_nodes or self.gpu_nodes.count

    @property
    def total_gpus(self) -> int:
        return self.gpu_nodes.count * self.gpu_nodes.instance.gpus


# The object-valued keys under the fsdp-eks namespace, with the section dataclass each parses into.
SECTIONS: dict[str, type] = {
    "network": NetworkConfig,
    "cluster": ClusterConfig,
    "gpuNodes": GpuNodesConfig,
    "storage": StorageConfig,
    "monitoring": MonitoringConfig,
    "job": JobConfig,
    "artifacts": ArtifactsConfig,
}
