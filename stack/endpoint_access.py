"""Who reaches the API endpoint of a cluster the stack creates, and from where `pulumi` runs.

`pulumi up` creates the platform and the job through the cluster's API, and so do every later preview (a server-side
dry run) and `pulumi destroy`. An endpoint the deploying machine cannot reach fails the first `up` after the VPC, the
cluster and the GPU nodes exist and bill: pulumi-eks skips its own health check when the endpoint is not public
(nodejs/eks/cluster/cluster.ts), so nothing fails earlier than the first Kubernetes object.

Two routes deploy a stack (docs/aws.md, "API endpoint access"; docs/ci.md, "Where CI runs pulumi"):
- LAPTOP: `pulumi` on a machine of the user's, outside the VPC;
- CI: the deploy workflow on the runner named by the repository variable DEPLOY_RUNNER, whose egress addresses are
  fixed and listed in DEPLOY_RUNNER_CIDRS. A stack is CI's when it names the permissions boundary the CI deploy role
  demands (cluster.rolePermissionsBoundary).

A route reaches the endpoint along one of two paths:
- PUBLIC: the public endpoint, from the CIDRs in cluster.publicAccessCidrs (EKS's publicAccessCidrs), never the whole
  internet;
- PRIVATE: the private endpoint, from a network inside the VPC or routed to it, admitted on 443 by
  cluster.privateAccessCidrs (a rule each on the cluster security group, which guards the control plane's interfaces
  in the VPC: EKS user guide, "Cluster API server endpoint"). Such a network exists before the cluster only in a VPC
  that exists before it: network.vpcId. Nothing can be routed into a VPC the same `up` creates.

The machine's own address is not known to the program: for the laptop the docs' one line sets it (OWN_CIDR_FIX); for
CI, ci/deploy_ready.py checks the runner's CIDRs against the stack file before anything is created.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from enum import Enum

from stack.config import StackConfig
from stack.fields import NAMESPACE

CLUSTER = f"{NAMESPACE}:cluster"
# The one line that lets the machine running `pulumi` reach a public endpoint: its own address as a /32
# (checkip.amazonaws.com answers with the caller's public IPv4 address).
OWN_CIDR_FIX = (
    f"pulumi config set --path {CLUSTER}.endpointPublicAccess true && "
    f"pulumi config set --path '{CLUSTER}.publicAccessCidrs[0]' \"$(curl -s https://checkip.amazonaws.com)/32\""
)
# What the control plane listens on (EKS user guide, "Cluster API server endpoint").
API_PORT = 443


class Route(Enum):
    LAPTOP = "laptop"
    CI = "ci"


class Path(Enum):
    PUBLIC = "public"
    PRIVATE = "private"


def route_of(config: StackConfig) -> Route:
    """CI deploys the stacks that name its permissions boundary (ci/deploy_ready.py refuses the others)."""
    return Route.CI if config.cluster.deployed_by_ci else Route.LAPTOP


def is_world(cidr: str) -> bool:
    """A CIDR of prefix length 0: every IPv4 address."""
    try:
        return ipaddress.IPv4Network(cidr).prefixlen == 0
    except ValueError:
        return False


def paths(config: StackConfig) -> dict[Path, list[str]]:
    """The paths to the endpoint of the cluster the stack creates, with the CIDRs each admits."""
    cluster, found = config.cluster, {}
    if cluster.endpoint_public_access and cluster.public_access_cidrs:
        found[Path.PUBLIC] = list(cluster.public_access_cidrs)
    if cluster.private_access_cidrs and config.network.uses_existing_vpc:
        found[Path.PRIVATE] = list(cluster.private_access_cidrs)
    return found


def fix_for(route: Route, cidrs: Sequence[str] = ()) -> str:
    """The lines that open the public endpoint to the route's own addresses (`cidrs`: the runner's, for CI)."""
    if route is Route.LAPTOP:
        return OWN_CIDR_FIX
    listed = cidrs or ["<DEPLOY_RUNNER_CIDRS>"]
    return " && ".join(
        [f"pulumi config set --path {CLUSTER}.endpointPublicAccess true"]
        + [f"pulumi config set --path '{CLUSTER}.publicAccessCidrs[{i}]' {cidr}" for i, cidr in enumerate(listed)]
    )


def _covered(cidr: str, admitted: Sequence[str]) -> bool:
    network = ipaddress.IPv4Network(cidr)
    for allowed in admitted:
        try:
            if network.subnet_of(ipaddress.IPv4Network(allowed)):
                return True
        except ValueError:
            continue  # a malformed CIDR is reported by the config checks
    return False


def unreachable_problem(config: StackConfig, route: Route, deployer_cidrs: Sequence[str] | None = None) -> str | None:
    """Why `route` cannot reach the endpoint of the cluster this stack creates, with the settings that fix it; None
    when it can. `deployer_cidrs`: the route's own egress where it is known (CI's runner); a laptop's is not, and
    publicAccessCidrs is taken to hold it (the fix sets exactly that)."""
    if config.cluster.existing:
        return None
    found = paths(config)
    who = "this machine" if route is Route.LAPTOP else "the CI runner (DEPLOY_RUNNER)"
    where = f"Pulumi.{config.stack}.yaml" if route is Route.CI else "the stack"
    if not found:
        private = (
            "; or, in an existing VPC (network.vpcId) that this machine's network is routed to, list that network in "
            f"{CLUSTER}.privateAccessCidrs"
        )
        if config.cluster.private_access_cidrs:
            private = (
                f"; {CLUSTER}.privateAccessCidrs cannot reach it: nothing can be routed into the VPC this same "
                "pulumi up creates (use network.vpcId for a VPC your network is routed to)"
            )
        return (
            f"{CLUSTER}.endpointPublicAccess: {config.cluster.endpoint_public_access} is not allowed for a new cluster "
            f"that {who} deploys: its API endpoint would be unreachable from there, and pulumi up would fail at its "
            "first Kubernetes object, after the VPC, the cluster and the GPU nodes exist and bill. Open the public "
            f"endpoint to {who} only: {fix_for(route, deployer_cidrs or ())}{private} (docs/aws.md, 'API endpoint "
            "access')"
        )
    if deployer_cidrs is None:
        return None
    admitted = [cidr for cidrs in found.values() for cidr in cidrs]
    missing = [cidr for cidr in deployer_cidrs if not _covered(cidr, admitted)]
    if not missing:
        return None
    return (
        f"{CLUSTER}.publicAccessCidrs: {config.cluster.public_access_cidrs!r} is not allowed for a stack CI deploys: "
        f"the runner's egress {', '.join(missing)} (DEPLOY_RUNNER_CIDRS) is in none of {where}'s "
        f"publicAccessCidrs or privateAccessCidrs, so the runner could not reach the API endpoint. Add it: "
        f"{fix_for(route, deployer_cidrs)}"
    )


def _cidr_settings(config: StackConfig) -> dict[str, list[str]]:
    cluster = config.cluster
    return {"publicAccessCidrs": cluster.public_access_cidrs, "privateAccessCidrs": cluster.private_access_cidrs}


def endpoint_problems(config: StackConfig) -> list[str]:
    """What the endpoint settings must be on their own, for any route: a public endpoint open to the networks the stack
    file names and never to the whole internet, a private path only on a cluster the stack creates."""
    cluster, settings = config.cluster, _cidr_settings(config)
    problems = [
        f"{CLUSTER}.{key}: {cidr!r} is not allowed; expected IPv4 CIDRs"
        for key, cidrs in settings.items()
        for cidr in cidrs
        if not _is_ipv4_cidr(cidr)
    ]
    if cluster.existing:
        if cluster.private_access_cidrs:
            problems.append(
                f"{CLUSTER}.privateAccessCidrs: {cluster.private_access_cidrs!r} is not allowed with cluster.existing; "
                "expected none (the stack changes no security group of a cluster it does not manage)"
            )
        return problems
    if cluster.endpoint_public_access and not cluster.public_access_cidrs:
        problems.append(
            f"{CLUSTER}.publicAccessCidrs: [] is not allowed with endpointPublicAccess true; expected your own "
            "networks' CIDRs that may reach the API (a CIDR open to the whole internet is refused). To allow only "
            f"this machine: {OWN_CIDR_FIX}"
        )
    if not cluster.endpoint_public_access and cluster.public_access_cidrs:
        problems.append(
            f"{CLUSTER}.publicAccessCidrs: {cluster.public_access_cidrs!r} is not allowed with endpointPublicAccess "
            "false; expected none (a private endpoint takes no public CIDRs)"
        )
    return problems + [
        f"{CLUSTER}.{key}: {cidr!r} is not allowed; expected your own networks' CIDRs (the API endpoint would be "
        f"open to the whole internet). To allow only this machine: {OWN_CIDR_FIX}"
        for key, cidrs in settings.items()
        for cidr in cidrs
        if is_world(cidr)
    ]


def _is_ipv4_cidr(cidr: str) -> bool:
    try:
        ipaddress.IPv4Network(cidr)
    except ValueError:
        return False
    return True
