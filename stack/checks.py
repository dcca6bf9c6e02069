"""Checks across keys of the stack config: network sizes, GPU placement, cluster identity, job shape.

Each returns problems in the form ConfigError lists them (key, value, what is allowed); `parse_stack_config` runs
them on every parse. Kept apart from the section declarations in stack/config.py so each file has one job.
The trainer's own rules across its options are not restated here: `trainer_rule_problems` checks the declared ones
(trainer/base/flags/config.py) on the options the pods get, with the model's shape and the world size the stack knows.
"""

from __future__ import annotations

import ipaddress
import re

from sizing.catalog import CATALOG
from stack.config import (
    ALL_CONTROL_PLANE_LOGS,
    CAPACITY_RESERVATION_ID,
    DNS_SUBDOMAIN,
    IAM_POLICY_ARN,
    IAM_ROLE_ARN,
    PLACEMENT_GROUP_NAME,
    SUBNET_ID,
    VPC_ID,
    NetworkConfig,
    StackConfig,
)
from stack.fields import NAMESPACE
from stack.job_api import job_api_problems
from stack.names import (
    DNS_LABEL_MAX_LENGTH,
    JOB_NAME_MAX_LENGTH,
    JOB_NAME_PREFIX,
    LABEL_VALUE,
    LABEL_VALUE_MAX_LENGTH,
    uncut_job_name,
)
from stack.trainer_config import stack_trainer_config, trainer_rule_problems
from trainer.base.flags.config import whole_micro_steps
from trainer.base.flags.options import Facts
from trainer.base.model.presets import find_shape


def cross_key_problems(config: StackConfig) -> list[str]:
    return (
        _network_problems(config)
        + _gpu_node_problems(config)
        + _cluster_problems(config)
        + _existing_cluster_problems(config)
        + _job_problems(config)
        + _artifacts_problems(config)
        + trainer_rule_problems(config.job, _trainer_facts(config))
        + stack_name_problems(config.stack, config.gpu_nodes.count if config.job.enabled else None)
    )


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
            f"{', '.join(config.availability_zones)}, or {az} added to {NAMESPACE}:network.availabilityZones"
            + ("" if config.network.availability_zones else " (unset: the region's a and b)")
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
    group = gpu.placement_group_name
    if group is not None and not PLACEMENT_GROUP_NAME.match(group):
        problems.append(
            f"{where}.placementGroupName: {group!r} is not allowed; expected a placement group name (1-255 "
            "printable ASCII characters)"
        )
    if group is not None and gpu.placement_group == "never":
        problems.append(
            f"{where}.placementGroup: 'never' is not allowed with placementGroupName {group!r}; expected auto, "
            "or no placementGroupName"
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
    boundary = config.cluster.role_permissions_boundary
    if boundary is not None and not IAM_POLICY_ARN.match(boundary):
        problems.append(
            f"{where}.rolePermissionsBoundary: {boundary!r} is not allowed; expected an IAM policy ARN such as "
            "arn:aws:iam::123456789012:policy/fsdp-eks-role-boundary"
        )
    for log in config.cluster.control_plane_logs:
        if log not in ALL_CONTROL_PLANE_LOGS:
            problems.append(
                f"{where}.controlPlaneLogs: {log!r} is not allowed; expected any of {', '.join(ALL_CONTROL_PLANE_LOGS)}"
            )
    name = config.cluster_name
    if not re.fullmatch(r"[0-9A-Za-z][A-Za-z0-9\-_]{0,99}", name):
        problems.append(
            f"{where}.name: {name!r} is not allowed; expected 1-100 letters, digits, - and _, "
            "starting with a letter or digit (EKS naming rule)"
        )
    return problems


def _existing_cluster_problems(config: StackConfig) -> list[str]:
    """An existing cluster gets no FSx from the stack, so a multi-node job needs the user's own shared claim."""
    if not config.cluster.existing:
        return []
    problems = []
    if config.storage.fsx:
        problems.append(
            f"{NAMESPACE}:storage.fsx: True is not allowed with cluster.existing; expected false (the stack makes "
            "no file system in a cluster it does not manage; give job.checkpointClaim instead)"
        )
    nodes = config.gpu_nodes.count
    if config.job.enabled and nodes > 1 and config.job.checkpoint_claim is None:
        problems.append(
            f"{NAMESPACE}:job.checkpointClaim: None is not allowed for a {nodes}-node job on an existing cluster; "
            "expected the name of a ReadWriteMany PersistentVolumeClaim in the training namespace that every node "
            "can mount (docs/aws.md, 'An existing cluster')"
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
    if nodes > 1 and not config.storage.fsx and job.checkpoint_claim is None and not config.cluster.existing:
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
    problems += _elastic_batch_problems(config)
    problems += job_api_problems(job.api, job.rdzv_backend, job.min_nodes, job.max_disruption_restarts)
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


def _artifacts_problems(config: StackConfig) -> list[str]:
    """The S3 checkpoints are a subset of the job's checkpoints: the trainer writes to S3 only a step it checkpoints
    (trainer/validate.py refuses --s3-checkpoint-every that is not a multiple of --checkpoint-every)."""
    every, checkpoint_every = config.artifacts.checkpoint_every, config.job.checkpoint_every
    if every is None or every % checkpoint_every == 0:
        return []
    return [
        f"{NAMESPACE}:artifacts.checkpointEvery: {every} is not allowed with job.checkpointEvery {checkpoint_every}; "
        f"expected a multiple of it (such as {checkpoint_every * max(1, round(every / checkpoint_every))}), or unset "
        "for every checkpoint"
    ]


def _trainer_facts(config: StackConfig) -> Facts:
    """What the trainer's rules that need outside facts are checked with: the model's shape where the project knows it
    (trainer/base/model/presets.py), and the job's world size, a rank per GPU. A disabled job has neither."""
    if not config.job.enabled:
        return Facts()
    return Facts(shape=find_shape(config.job.model), world_size=config.total_gpus or None)


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
    trainer = stack_trainer_config(job)  # the trainer's rule (whole_micro_steps) at each world size it may run at
    bad = [n for n in range(job.min_nodes, gpu.count + 1) if whole_micro_steps(trainer, gpu.instance.gpus * n)]
    if not bad:
        return []
    problem = (
        f"{where}.globalBatchSize: {job.global_batch_size} is not allowed with minNodes {job.min_nodes}; "
        f"expected a multiple of batchSize x GPUs at every node count from {job.min_nodes} to {gpu.count} "
        f"(fails at {', '.join(map(str, bad))} node(s))"
    )
    return [problem]


def _derived_names(job: str, nodes: int) -> list[tuple[str, str, int]]:
    """(what, name, limit) for the job's name and each name the controllers derive from it, on either job API (a
    stack may switch job.api, and the local run may run it as the other), for a job of `nodes` nodes."""
    last = nodes - 1
    return [
        # workloads/job/spec.py cuts a longer name, which would give two stacks one job (and one Secret, one volume).
        ("the job's name", job, JOB_NAME_MAX_LENGTH),
        # kubeflow/trainer v1.9.4 pkg/webhooks/pytorch/pytorchjob_webhook.go validatePyTorchJob: NameIsDNS1035Label.
        ("the PyTorchJob's name", job, DNS_LABEL_MAX_LENGTH),
        # v1.9.4 pkg/core/utils.go GenGeneralName names each pod and its headless Service "<job>-worker-<index>"; a
        # Service name is a DNS-1035 label, and c10d's rendezvous reaches worker 0 by it.
        ("the PyTorchJob's last worker Service", f"{job}-worker-{last}", DNS_LABEL_MAX_LENGTH),
        # kubeflow/trainer v2.3.0 pkg/apis/trainer/v1alpha1/trainjob_types.go: metadata.name at most 63, RFC 1035.
        ("the TrainJob's name", job, DNS_LABEL_MAX_LENGTH),
        # kubernetes-sigs/jobset v0.12.0 pkg/webhooks/jobset_webhook.go ValidateCreate: the longest Job name
        # (placement.GenJobName "<jobset>-<replicatedJob>-<index>"; the runtime's one replicated job "node") and the
        # longest pod name (GenPodName "<jobset>-node-0-<completion index>" and a 5-character suffix) are DNS-1035.
        ("the JobSet's Job", f"{job}-node-0", DNS_LABEL_MAX_LENGTH),
        ("the JobSet's last pod", f"{job}-node-0-{last}-abcde", DNS_LABEL_MAX_LENGTH),
    ]


def longest_stack_name(nodes: int) -> int:
    """The most characters a stack name may have for a job of `nodes` nodes (and as a label value)."""
    job = JOB_NAME_PREFIX  # each derived name grows by one character per character of the stack's name
    fits = [limit - len(name) for _, name, limit in _derived_names(job, nodes)]
    return min(LABEL_VALUE_MAX_LENGTH, *fits)


def stack_name_problems(stack: str, nodes: int | None) -> list[str]:
    """The stack's name is a label value on the job's objects and etcd's NetworkPolicy (stack/names.py STACK_LABEL);
    with a job (`nodes` not None), the job's name is made from it, and every name derived from that must fit its
    DNS label. The name comes from the engine (pulumi.get_stack()) or the stack file's name (Pulumi.<stack>.yaml)."""
    where, problems = f"stack name {stack!r}", []
    rename = "rename the stack (pulumi stack rename; the file Pulumi.<stack>.yaml is renamed with it)"
    if not stack or not LABEL_VALUE.match(stack):  # an empty label value is valid; an empty stack name is not
        problems.append(
            f"{where} is not allowed; expected letters, digits, '-', '_' and '.', starting and ending with a letter "
            f"or digit, as a Kubernetes label value must (apimachinery IsValidLabelValue): {rename}"
        )
    longest = longest_stack_name(max(nodes or 1, 1))
    if len(stack) > LABEL_VALUE_MAX_LENGTH:
        problems.append(
            f"{where} ({len(stack)} characters) is not allowed; a Kubernetes label value has at most "
            f"{LABEL_VALUE_MAX_LENGTH} (apimachinery IsValidLabelValue); expected at most {longest} characters: "
            f"{rename}"
        )
    if nodes is None:
        return problems
    job = uncut_job_name(stack)
    broken = [
        f"{what} {name!r} has {len(name)} characters, over {limit}"
        for what, name, limit in _derived_names(job, max(nodes, 1))
        if len(name) > limit  # their syntax holds by construction: job_name keeps [a-z0-9-], "fsdp-" first
    ]
    if broken:
        problems.append(
            f"{where} ({len(stack)} characters) is not allowed for a {nodes}-node job: {'; '.join(broken)}; "
            f"expected at most {longest} characters: {rename}"
        )
    return problems
