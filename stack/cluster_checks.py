"""Checks of the cluster the stack creates that EKS or the AWS provider would otherwise answer mid-`pulumi up`. They
say how long its name may be, given the node groups named after it, who may reach its API endpoint, whether a system
node runs in the AZ of Prometheus' volume, and which administrators get an access entry from the stack.

Kept apart from stack/checks.py (the checks across every section) because infra/ names its node groups with
`node_group_name_prefix` below: the limit and the names it limits are written once, here.
"""

from __future__ import annotations

import re

from stack.config import ClusterConfig, StackConfig
from stack.endpoint_access import endpoint_problems
from stack.fields import NAMESPACE
from stack.hub_token_secret import secret_prefix_problems
from stack.names import ARTIFACTS_BUCKET_PREFIX, CLUSTER_NAME_PREFIX

# The AWS provider refuses a node group name prefix over 37 characters: a managed node group's name has at most 63
# (EKS API reference, CreateNodegroup), and the provider appends a 26-character unique suffix to a prefix
# (hashicorp/terraform-provider-aws, internal/service/eks/node_group.go: node_group_name_prefix is validated with
# StringLenBetween(0, 63-id.UniqueIDSuffixLength); terraform-plugin-sdk helper/id UniqueIDSuffixLength = 26).
NODE_GROUP_NAME_MAX_LENGTH = 63
UNIQUE_SUFFIX_LENGTH = 26
NODE_GROUP_NAME_PREFIX_MAX_LENGTH = NODE_GROUP_NAME_MAX_LENGTH - UNIQUE_SUFFIX_LENGTH
# The node groups the stack makes, each named "<cluster>-<group>-<unique suffix>" (infra/cluster.py and
# infra/gpu_nodes.py).
SYSTEM_NODE_GROUP_NAME = "system"
GPU_NODE_GROUP_NAME = "gpu"
NODE_GROUP_NAMES = (SYSTEM_NODE_GROUP_NAME, GPU_NODE_GROUP_NAME)


def node_group_name_prefix(cluster_name: str, group: str) -> str:
    """The prefix a node group's name starts with; the provider adds a unique suffix (a replacement group is created
    beside the old one instead of colliding with its name)."""
    return f"{cluster_name}-{group}-"


def longest_cluster_name() -> int:
    """The most characters a cluster name the stack creates may have: every node group's prefix must fit."""
    return min(NODE_GROUP_NAME_PREFIX_MAX_LENGTH - len(node_group_name_prefix("", g)) for g in NODE_GROUP_NAMES)


def cluster_name_problems(config: StackConfig) -> list[str]:
    """A cluster the stack creates names its node groups after itself; EKS's own limit (100) is not the binding one."""
    if config.cluster.existing:
        return []
    name, longest = config.cluster_name, longest_cluster_name()
    if len(name) <= longest:
        return []
    source = (
        f"{NAMESPACE}:cluster.name"
        if config.cluster.name
        else f"the default cluster name ({CLUSTER_NAME_PREFIX}{config.stack})"
    )
    return [
        f"{source}: {name!r} ({len(name)} characters) is not allowed; expected at most {longest} characters: the node "
        f"group name prefix {node_group_name_prefix(name, SYSTEM_NODE_GROUP_NAME)!r} must have at most "
        f"{NODE_GROUP_NAME_PREFIX_MAX_LENGTH} (the AWS provider's limit for node_group_name_prefix)"
    ]


def deploy_role_cluster_name_problems(config: StackConfig) -> list[str]:
    """A stack CI deploys (it names the permissions boundary the CI deploy role demands) creates its cluster under a
    name the deploy role may manage: ci/deploy_policy.py scopes eks:* to clusters named CLUSTER_NAME_PREFIX*, so
    another name would fail at CreateCluster, after the network is built. An existing cluster is granted by name
    instead (`python -m ci --existing-cluster NAME`)."""
    cluster = config.cluster
    if cluster.existing or not cluster.deployed_by_ci or not cluster.name:
        return []
    if cluster.name.startswith(CLUSTER_NAME_PREFIX):
        return []
    return [
        f"{NAMESPACE}:cluster.name: {cluster.name!r} is not allowed with cluster.rolePermissionsBoundary; expected a "
        f"name starting {CLUSTER_NAME_PREFIX!r} (the CI deploy role manages only clusters so named), or no "
        f"cluster.name (the default, {CLUSTER_NAME_PREFIX}{config.stack})"
    ]


def deploy_role_secret_problems(config: StackConfig) -> list[str]:
    """A stack CI deploys names its token's secret under SECRET_NAME_PREFIX: the boundary every role of such a stack
    carries lets it read no other secret (ci/role_boundary.py), so the job would fail at start, not at preview."""
    return secret_prefix_problems(config.job.hf_token_secret, ci_deployed=config.cluster.deployed_by_ci)


def deploy_role_bucket_problems(config: StackConfig) -> list[str]:
    """A stack CI deploys writes its artifacts to a bucket named under ARTIFACTS_BUCKET_PREFIX: the boundary every
    role of such a stack carries lets it write to no other bucket (ci/role_boundary.py), so the job would fail at its
    first checkpoint, not at preview."""
    bucket = config.artifacts.bucket
    if not config.cluster.deployed_by_ci or bucket is None or bucket.startswith(ARTIFACTS_BUCKET_PREFIX):
        return []
    return [
        f"{NAMESPACE}:artifacts.bucket: {bucket!r} is not allowed on a stack CI deploys "
        "(cluster.rolePermissionsBoundary is set); expected a bucket whose name starts with "
        f"{ARTIFACTS_BUCKET_PREFIX!r}, the only buckets the boundary lets the job's pods write, or unset for the "
        "stack's own"
    ]


def role_key(role_arn: str) -> tuple[str, str] | None:
    """(account, role name) of an IAM role ARN; a role's name is unique in its account, whatever its path (IAM user
    guide, "IAM identifiers"), so two ARNs of one role compare equal."""
    match = re.fullmatch(r"arn:[\w-]+:iam::(\d{12}):role/(?:[\w+=,.@/-]*/)?([\w+=,.@-]+)", role_arn)
    return (match.group(1), match.group(2)) if match else None


def caller_role(caller_arn: str) -> tuple[str, str] | None:
    """(account, role name) of the role behind sts:GetCallerIdentity's ARN: an assumed-role session's role, which is
    the principal EKS gives the creator's access entry; None for a user or another kind of principal."""
    match = re.fullmatch(r"arn:[\w-]+:sts::(\d{12}):assumed-role/([\w+=,.@-]+)/.+", caller_arn)
    if match:
        return (match.group(1), match.group(2))
    return role_key(caller_arn)


def admin_access_entries(cluster: ClusterConfig) -> dict[int, str]:
    """The roles the stack gives an access entry: every one in adminRoleArns but cluster.creatorRoleArn. pulumi-eks
    creates the cluster with bootstrapClusterCreatorAdminPermissions (pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts
    createCluster), so EKS makes a cluster-admin entry for the creating principal itself, and a principal can be in
    only one access entry (EKS user guide, "Create access entries"): a second entry for the creator fails
    CreateAccessEntry with ResourceInUseException. Who created the cluster is a fact of the stack's config, never of
    who runs `pulumi`: a preview as one role and an update as another register the same entries. Keyed by the role's
    place in the list, so the other entries keep their names."""
    creator = role_key(cluster.creator_role_arn) if cluster.creator_role_arn else None
    return {
        index: arn for index, arn in enumerate(cluster.admin_role_arns) if creator is None or role_key(arn) != creator
    }


def role_arn(role: tuple[str, str], partition: str) -> str:
    """An ARN of the role without its path: what the caller's session names; enough for creatorRoleArn, which is
    compared by account and name."""
    return f"arn:{partition}:iam::{role[0]}:role/{role[1]}"


def creator_problems(cluster: ClusterConfig, cluster_name: str, caller_arn: str) -> list[str]:
    """What goes wrong when the run that creates the cluster runs as `caller_arn`: EKS gives the creator's entry to
    the caller, whatever cluster.creatorRoleArn says. Only for a run that creates (or replaces) the cluster: once it
    exists, the caller changes nothing. The run is refused (infra/cluster.py): the caller listed in adminRoleArns
    would fail CreateAccessEntry with ResourceInUseException after the control plane exists, and a creator other than
    the one named would leave that role without the access the stack file promises it. Never a different plan.

    Nothing on a stack CI deploys (it sets cluster.rolePermissionsBoundary): there the cluster is created by the
    deploy job's `pulumi up --plan`, as the deploy role, while the preview that shows this ran as the preview role
    (docs/ci.md), so the preview's caller says nothing about the creator. Locally, `pulumi up` previews and updates
    as one caller."""
    if cluster.deployed_by_ci:
        return []
    caller = caller_role(caller_arn)
    partition = caller_arn.split(":")[1]
    creator = role_key(cluster.creator_role_arn) if cluster.creator_role_arn else None
    if creator is not None and caller != creator:
        instead = (
            f", or set `pulumi config set --path {NAMESPACE}:cluster.creatorRoleArn {role_arn(caller, partition)}`"
            if caller
            else ""
        )
        return [
            f"this run creates {cluster_name} as {caller_arn}: EKS gives that principal the creator's cluster-admin "
            f"access entry, not cluster.creatorRoleArn {cluster.creator_role_arn}, which gets no entry from the stack. "
            f"Run the first `pulumi up` as {cluster.creator_role_arn}{instead}"
        ]
    listed = [arn for arn in cluster.admin_role_arns if caller is not None and role_key(arn) == caller]
    if creator is None and listed:
        return [
            f"this run creates {cluster_name} as {listed[0]}, which cluster.adminRoleArns lists: EKS makes that role's "
            "cluster-admin access entry itself, and the stack's second entry for it would be refused "
            "(ResourceInUseException). Name the creator: "
            f"`pulumi config set --path {NAMESPACE}:cluster.creatorRoleArn {listed[0]}`"
        ]
    return []


def prometheus_volume_problems(config: StackConfig) -> list[str]:
    """On its own cluster the stack creates Prometheus' EBS volume in the GPU nodes' AZ (workloads/platform/
    monitoring.py), and an EBS volume attaches only to an instance in its AZ: a system node must run there. The
    system node group spans one private subnet per AZ, and its Auto Scaling group keeps its instances balanced
    across them (EC2 Auto Scaling user guide, "Rebalancing activities"), so as many nodes as AZs puts one in each."""
    cluster, monitoring = config.cluster, config.monitoring
    if cluster.existing or not monitoring.enabled or not monitoring.prometheus_storage_gib:
        return []
    if config.network.uses_existing_vpc:
        return []  # the subnets' AZs are not in the config; docs/aws.md asks for a private subnet in the GPU AZ
    zones = len(config.availability_zones)
    if cluster.system_node_count >= zones:
        return []
    return [
        f"{NAMESPACE}:cluster.systemNodeCount: {cluster.system_node_count} is not allowed with "
        f"monitoring.prometheusStorageGiB {monitoring.prometheus_storage_gib}; expected at least {zones} (one system "
        f"node per AZ, so that one runs in {config.gpu_availability_zone}, where Prometheus' volume is), or "
        "monitoring.prometheusStorageGiB 0 (samples in an emptyDir)"
    ]


def cluster_problems(config: StackConfig) -> list[str]:
    return (
        cluster_name_problems(config)
        + deploy_role_cluster_name_problems(config)
        + deploy_role_secret_problems(config)
        + deploy_role_bucket_problems(config)
        + endpoint_problems(config)
        + prometheus_volume_problems(config)
    )
