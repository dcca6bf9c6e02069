"""The stack's config as typed, validated dataclasses, with every default applied here in code.

Pulumi applies the defaults declared in Pulumi.yaml only when its CLI runs; under test mocks, in the render CLI
and in the local run nothing does, so this module is the one place defaults live (a test keeps Pulumi.yaml in
step). Every problem is collected and raised as one ConfigError before any resource is registered.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from infra.catalog import CATALOG, InstanceType
from infra.config_fields import (
    NAMESPACE,
    ConfigError,
    at_least,
    between,
    decode_object,
    one_of,
    one_of_ints,
    parse_section,
    setting,
)
from trainer.presets import find_shape
from workloads.sizing import fit_problems

SHARDING_STRATEGIES = ("FULL_SHARD", "HYBRID_SHARD", "SHARD_GRAD_OP", "NO_SHARD")
CAPACITY_TYPES = ("ON_DEMAND", "CAPACITY_BLOCK", "SPOT")
ALL_CONTROL_PLANE_LOGS = ["api", "audit", "authenticator", "controllerManager", "scheduler"]

# EC2 capacity reservation ids (ODCRs and capacity blocks alike): "cr-" and 17 hex digits.
CAPACITY_RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{17}$")
VPC_ID = re.compile(r"^vpc-[0-9a-f]{8}([0-9a-f]{9})?$")
SUBNET_ID = re.compile(r"^subnet-[0-9a-f]{8}([0-9a-f]{9})?$")
IAM_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
REGION = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d$")
# Kubernetes object names (RFC 1123 subdomain), such as a PersistentVolumeClaim's.
DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# EKS versions this project is tested against; the newest is the default.
KUBERNETES_VERSIONS = ("1.33", "1.34", "1.35")


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
        "kubernetesVersion", KUBERNETES_VERSIONS[-1], "EKS Kubernetes version.", one_of(*KUBERNETES_VERSIONS)
    )
    endpoint_public_access: bool = setting(
        "endpointPublicAccess",
        True,
        "Whether the API endpoint is reachable from the internet (private access is always on).",
    )
    public_access_cidrs: list[str] = setting(
        "publicAccessCidrs", ["0.0.0.0/0"], "CIDRs allowed to reach a public API endpoint.", factory=True
    )
    admin_role_arns: list[str] = setting(
        "adminRoleArns", [], "IAM roles given cluster-admin through EKS access entries.", factory=True
    )
    control_plane_logs: list[str] = setting(
        "controlPlaneLogs", ALL_CONTROL_PLANE_LOGS, "Control-plane log types sent to CloudWatch.", factory=True
    )
    system_node_instance_type: str = setting(
        "systemNodeInstanceType", "m6i.2xlarge", "Instance type of the CPU node group for controllers and monitoring."
    )
    system_node_count: int = setting("systemNodeCount", 2, "Nodes in the CPU system node group.", between(1, 20))
    existing: bool = setting(
        "existing",
        False,
        "Use an existing cluster (kubeconfig from the secret fsdp-eks:kubeconfig) instead of creating one.",
    )


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
    root_volume_gib: int = setting(
        "rootVolumeGiB", 500, "gp3 root volume per node (container images, logs).", at_least(100)
    )
    price_per_hour: float | None = setting(
        "pricePerHour", None, "Your price per node-hour in USD; default: the catalog's on-demand list price."
    )

    @property
    def instance(self) -> InstanceType:
        return CATALOG[self.instance_type]

    @property
    def efa_enabled(self) -> bool:
        return self.instance.supports_efa if self.efa is None else self.efa

    @property
    def uses_placement_group(self) -> bool:
        # A cluster placement group on top of an ODCR or a capacity block makes launches fail with
        # InsufficientInstanceCapacity: the reservation already fixes where the instances go.
        if self.placement_group == "auto":
            return self.capacity_reservation_id is None
        return self.placement_group == "always"

    @property
    def node_price_per_hour(self) -> float:
        return self.instance.price_per_hour_usd if self.price_per_hour is None else self.price_per_hour


@dataclass(frozen=True)
class StorageConfig:
    fsx: bool = setting(
        "fsx", True, "An FSx for Lustre file system in the GPU nodes' AZ for checkpoints, shared by every node."
    )
    fsx_capacity_gib: int = setting(
        "fsxCapacityGiB", 1200, "FSx for Lustre capacity: 1200, or a multiple of 2400 (PERSISTENT_2 sizes).",
        lambda v: None if v == 1200 or (v > 0 and v % 2400 == 0) else "1200 or a multiple of 2400",
    )
    fsx_throughput_per_tib: int = setting(
        "fsxThroughputPerTiB", 250, "FSx for Lustre MB/s per TiB of capacity.", one_of_ints(125, 250, 500, 1000)
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
        "gp3 volume for Prometheus' samples (EBS CSI driver); 0 keeps them in an emptyDir that a pod restart loses.",
        at_least(0),
    )


@dataclass(frozen=True)
class JobConfig:
    enabled: bool = setting("enabled", True, "Run the PyTorchJob as part of the stack.")
    model: str = setting("model", "meta-llama/Llama-2-7b-hf", "HF hub id, path in the image, or preset name.")
    dataset: str = setting("dataset", "knkarthick/dialogsum", "HF dataset id or a path inside the pod.")
    sharding_strategy: str = setting(
        "shardingStrategy", "FULL_SHARD", "FSDP sharding strategy.", one_of(*SHARDING_STRATEGIES)
    )
    mixed_precision: str = setting("mixedPrecision", "bf16", "Mixed precision.", one_of("bf16", "fp16", "fp32"))
    activation_checkpointing: str = setting(
        "activationCheckpointing", "none", "Activation checkpointing.", one_of("none", "full", "selective")
    )
    compile: bool = setting("compile", False, "torch.compile each decoder block.")
    seq_len: int = setting("seqLen", 4096, "Tokens per sequence.", at_least(1))
    batch_size: int = setting("batchSize", 1, "Sequences per GPU per micro step.", at_least(1))
    global_batch_size: int | None = setting(
        "globalBatchSize", None, "Sequences per optimizer step; default: batchSize x all GPUs. Kept for any world size."
    )
    steps: int = setting("steps", 1000, "Optimizer steps.", at_least(1))
    learning_rate: float = setting("learningRate", 2e-5, "Peak learning rate.")
    checkpoint_every: int = setting("checkpointEvery", 100, "Steps between checkpoints.", at_least(1))
    rdzv_backend: str = setting(
        "rdzvBackend", "etcd", "torchrun rendezvous: the platform's etcd, or c10d.", one_of("etcd", "c10d")
    )
    max_restarts: int = setting("maxRestarts", 3, "torchrun restarts of the worker group after a failure.", at_least(0))
    min_nodes: int | None = setting(
        "minNodes", None, "Fewest nodes the elastic job runs on after losing some; default: all of them."
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
class StackConfig:
    """Everything the program needs, validated. Built by `parse_stack_config`."""

    stack: str
    region: str
    network: NetworkConfig = field(default_factory=NetworkConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    gpu_nodes: GpuNodesConfig = field(default_factory=GpuNodesConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)
    monitoring: MonitoringConfig = field(default_factory=MonitoringConfig)
    job: JobConfig = field(default_factory=JobConfig)

    @property
    def cluster_name(self) -> str:
        return self.cluster.name or f"fsdp-eks-{self.stack}"

    @property
    def availability_zones(self) -> list[str]:
        return self.network.availability_zones or [f"{self.region}a", f"{self.region}b"]

    @property
    def gpu_availability_zone(self) -> str:
        return self.gpu_nodes.availability_zone or self.availability_zones[0]

    @property
    def total_gpus(self) -> int:
        return self.gpu_nodes.count * self.gpu_nodes.instance.gpus

    @property
    def cost_per_hour(self) -> float:
        return round(self.gpu_nodes.count * self.gpu_nodes.node_price_per_hour, 2)


# The object-valued keys under the fsdp-eks namespace, with the section dataclass each parses into.
SECTIONS: dict[str, type] = {
    "network": NetworkConfig,
    "cluster": ClusterConfig,
    "gpuNodes": GpuNodesConfig,
    "storage": StorageConfig,
    "monitoring": MonitoringConfig,
    "job": JobConfig,
}
# Scalar secrets under the namespace: read as Pulumi secrets, never parsed into the plain config.
SECRET_KEYS = ("hfToken", "kubeconfig")


def parse_stack_config(raw: Mapping[str, Any], stack: str) -> StackConfig:
    """Validate a stack's raw config: keys as the engine names them ("fsdp-eks:gpuNodes", "aws:region"),
    object values as maps or JSON strings. Raises ConfigError listing every problem."""
    problems: list[str] = []
    known = {f"{NAMESPACE}:{name}" for name in (*SECTIONS, *SECRET_KEYS)}
    for key in sorted(raw):
        if key.startswith(f"{NAMESPACE}:") and key not in known:
            allowed = ", ".join(sorted(k.split(":", 1)[1] for k in known))
            problems.append(f"{key}: unknown key; allowed keys are {allowed}")
    region = raw.get("aws:region")
    if not isinstance(region, str) or not REGION.match(region):
        problems.append(f"aws:region: {region!r} is not allowed; expected an AWS region name such as us-east-1")
        region = "us-east-1"  # keep checking the rest against a well-formed region
    sections = {
        name: parse_section(cls, name, decode_object(name, raw.get(f"{NAMESPACE}:{name}"), problems), problems)
        for name, cls in SECTIONS.items()
    }
    config = StackConfig(
        stack=stack,
        region=region,
        network=sections["network"],
        cluster=sections["cluster"],
        gpu_nodes=sections["gpuNodes"],
        storage=sections["storage"],
        monitoring=sections["monitoring"],
        job=sections["job"],
    )
    # Cross-key checks run on what parsed: a value rejected above fell back to its default, so they stay sound.
    problems += _network_problems(config) + _gpu_node_problems(config) + _cluster_problems(config)
    problems += _job_problems(config)
    problems += [] if problems else fit_problems(config)  # memory per GPU, once the rest is sound (workloads/sizing.py)
    if problems:
        raise ConfigError(problems)
    return config


def _network_problems(config: StackConfig) -> list[str]:
    net, problems = config.network, []
    where = f"{NAMESPACE}:network"
    for az in net.availability_zones:
        if not re.fullmatch(re.escape(config.region) + r"[a-z]", az):
            problems.append(
                f"{where}.availabilityZones: {az!r} is not allowed; expected an AZ of {config.region} "
                f"such as {config.region}a"
            )
    if net.availability_zones and len(set(net.availability_zones)) < 2:
        problems.append(
            f"{where}.availabilityZones: {net.availability_zones!r} is not allowed; expected at least 2 AZs, "
            "as EKS requires subnets in two"
        )
    if net.uses_existing_vpc:
        problems += _existing_vpc_problems(net)
        return problems
    try:
        vpc = ipaddress.IPv4Network(net.cidr)
    except ValueError:
        return [*problems, f"{where}.cidr: {net.cidr!r} is not allowed; expected an IPv4 CIDR such as 10.0.0.0/16"]
    azs = len(config.availability_zones)
    needed = azs * (2 ** (32 - net.private_subnet_prefix) + 2 ** (32 - net.public_subnet_prefix))
    if (
        net.private_subnet_prefix <= vpc.prefixlen
        or net.public_subnet_prefix <= vpc.prefixlen
        or needed > vpc.num_addresses
    ):
        problems.append(
            f"{where}.cidr: {net.cidr!r} is too small for {azs} private /{net.private_subnet_prefix} and {azs} public "
            f"/{net.public_subnet_prefix} subnets ({needed} addresses, the CIDR has {vpc.num_addresses}); expected a "
            "larger CIDR or longer subnet prefixes"
        )
    return problems


def _existing_vpc_problems(net: NetworkConfig) -> list[str]:
    where, problems = f"{NAMESPACE}:network", []
    if not VPC_ID.match(net.vpc_id or ""):
        problems.append(
            f"{where}.vpcId: {net.vpc_id!r} is not allowed; expected a VPC id such as vpc-0abc12345def67890"
        )
    for subnet in [
        *net.private_subnet_ids,
        *net.public_subnet_ids,
        *([net.gpu_subnet_id] if net.gpu_subnet_id else []),
    ]:
        if not SUBNET_ID.match(subnet):
            problems.append(f"{where}: subnet {subnet!r} is not allowed; expected a subnet id such as subnet-0abc1234")
    if len(net.private_subnet_ids) < 2:
        problems.append(
            f"{where}.privateSubnetIds: {net.private_subnet_ids!r} is not allowed; with vpcId, expected "
            "at least 2 private subnets in different AZs"
        )
    if net.gpu_subnet_id is None:
        problems.append(
            f"{where}.gpuSubnetId: None is not allowed; with vpcId, expected the private subnet id of the GPU nodes' AZ"
        )
    return problems


def _gpu_node_problems(config: StackConfig) -> list[str]:
    gpu, problems = config.gpu_nodes, []
    where = f"{NAMESPACE}:gpuNodes"
    az = gpu.availability_zone
    if az is not None and not re.fullmatch(re.escape(config.region) + r"[a-z]", az):
        problems.append(
            f"{where}.availabilityZone: {az!r} is not allowed; expected an AZ of {config.region} "
            f"such as {config.region}a"
        )
    elif az is not None and not config.network.uses_existing_vpc and az not in config.availability_zones:
        problems.append(
            f"{where}.availabilityZone: {az!r} is not allowed; expected one of the network's AZs "
            f"{', '.join(config.availability_zones)}"
        )
    if gpu.efa and not gpu.instance.supports_efa:
        efa_types = ", ".join(name for name, t in CATALOG.items() if t.supports_efa)
        problems.append(
            f"{where}.efa: True is not allowed for {gpu.instance_type}, which has no EFA; expected false, "
            f"or an EFA type: {efa_types}"
        )
    reservation = gpu.capacity_reservation_id
    if reservation is not None and not CAPACITY_RESERVATION_ID.match(reservation):
        problems.append(
            f"{where}.capacityReservationId: {reservation!r} is not allowed; expected 'cr-' and 17 hex "
            "digits, such as cr-0123456789abcdef0"
        )
    if gpu.capacity_type == "CAPACITY_BLOCK" and reservation is None:
        problems.append(
            f"{where}.capacityReservationId: None is not allowed with capacityType CAPACITY_BLOCK; "
            "expected the capacity block's reservation id (cr-...)"
        )
    if gpu.capacity_type == "SPOT" and reservation is not None:
        problems.append(
            f"{where}.capacityType: 'SPOT' is not allowed with a capacityReservationId; expected "
            "ON_DEMAND or CAPACITY_BLOCK"
        )
    if reservation is not None and az is None:
        problems.append(
            f"{where}.availabilityZone: None is not allowed with a capacity reservation; expected the reservation's AZ"
        )
    if gpu.price_per_hour is not None and gpu.price_per_hour < 0:
        problems.append(f"{where}.pricePerHour: {gpu.price_per_hour!r} is not allowed; expected a number >= 0")
    return problems


def _cluster_problems(config: StackConfig) -> list[str]:
    where, problems = f"{NAMESPACE}:cluster", []
    for arn in config.cluster.admin_role_arns:
        if not IAM_ROLE_ARN.match(arn):
            problems.append(
                f"{where}.adminRoleArns: {arn!r} is not allowed; expected an IAM role ARN such as "
                "arn:aws:iam::123456789012:role/Admin"
            )
    for log in config.cluster.control_plane_logs:
        if log not in ALL_CONTROL_PLANE_LOGS:
            problems.append(
                f"{where}.controlPlaneLogs: {log!r} is not allowed; expected any of {', '.join(ALL_CONTROL_PLANE_LOGS)}"
            )
    for cidr in config.cluster.public_access_cidrs:
        try:
            ipaddress.IPv4Network(cidr)
        except ValueError:
            problems.append(f"{where}.publicAccessCidrs: {cidr!r} is not allowed; expected IPv4 CIDRs")
    name = config.cluster_name
    if not re.fullmatch(r"[0-9A-Za-z][A-Za-z0-9\-_]{0,99}", name):
        problems.append(
            f"{where}.name: {name!r} is not allowed; expected 1-100 letters, digits, - and _, "
            "starting with a letter or digit (EKS naming rule)"
        )
    return problems


def _job_problems(config: StackConfig) -> list[str]:
    job, gpu, problems = config.job, config.gpu_nodes, []
    where = f"{NAMESPACE}:job"
    if not job.enabled:
        return problems
    nodes = gpu.count
    if nodes < 1:
        problems.append(
            f"{where}.enabled: True is not allowed with gpuNodes.count {nodes}; expected at least one GPU "
            "node, or job.enabled false"
        )
    if nodes > 1 and not config.storage.fsx and job.checkpoint_claim is None:
        problems.append(
            f"{NAMESPACE}:storage.fsx: False is not allowed for a {nodes}-node job without job.checkpointClaim; "
            "expected true, or the name of a ReadWriteMany claim every node can mount in job.checkpointClaim"
        )
    if job.sharding_strategy == "HYBRID_SHARD" and nodes < 2:
        problems.append(
            f"{where}.shardingStrategy: 'HYBRID_SHARD' is not allowed on {nodes} node(s); it replicates "
            "across nodes, expected FULL_SHARD or SHARD_GRAD_OP on one node, or gpuNodes.count >= 2"
        )
    if job.min_nodes is not None and not 1 <= job.min_nodes <= max(nodes, 1):
        problems.append(f"{where}.minNodes: {job.min_nodes} is not allowed; expected 1 to gpuNodes.count ({nodes})")
    shape = find_shape(job.model)
    if shape is not None and job.seq_len > shape.max_position_embeddings:
        problems.append(
            f"{where}.seqLen: {job.seq_len} is not allowed for {job.model}; expected at most its "
            f"max_position_embeddings ({shape.max_position_embeddings})"
        )
    gpus = nodes * gpu.instance.gpus
    if job.global_batch_size is not None and gpus:
        per_step = job.batch_size * gpus
        if job.global_batch_size % per_step:
            problems.append(
                f"{where}.globalBatchSize: {job.global_batch_size} is not allowed; expected a multiple "
                f"of batchSize x GPUs ({job.batch_size} x {gpus} = {per_step})"
            )
    problems += _elastic_batch_problems(config)
    claim = job.checkpoint_claim
    if claim is not None and not DNS_SUBDOMAIN.match(claim):
        problems.append(
            f"{where}.checkpointClaim: {claim!r} is not allowed; expected a PersistentVolumeClaim name "
            "(lowercase letters, digits, '-' and '.', at most 253 characters)"
        )
    if job.checkpoint_every > job.steps:
        problems.append(
            f"{where}.checkpointEvery: {job.checkpoint_every} is not allowed; expected at most steps "
            f"({job.steps}), or no checkpoint would be written"
        )
    return problems


def _elastic_batch_problems(config: StackConfig) -> list[str]:
    """An elastic job (minNodes < count) may run at any node count in between; the trainer keeps the global batch
    by gradient accumulation, which must come out whole at every one of those world sizes."""
    job, gpu = config.job, config.gpu_nodes
    where = f"{NAMESPACE}:job"
    if job.min_nodes is None or not 1 <= job.min_nodes < gpu.count:
        return []
    if job.global_batch_size is None:
        problem = (
            f"{where}.globalBatchSize: None is not allowed with minNodes {job.min_nodes} < gpuNodes.count "
            f"({gpu.count}); expected a fixed global batch, or the effective batch changes when nodes are lost"
        )
        return [problem]
    bad = [
        n
        for n in range(job.min_nodes, gpu.count + 1)
        if job.global_batch_size % (job.batch_size * gpu.instance.gpus * n)
    ]
    if not bad:
        return []
    problem = (
        f"{where}.globalBatchSize: {job.global_batch_size} is not allowed with minNodes {job.min_nodes}; "
        f"expected a multiple of batchSize x GPUs at every node count from {job.min_nodes} to {gpu.count} "
        f"(fails at {', '.join(map(str, bad))} node(s))"
    )
    return [problem]
