"""Whether the route that deploys a stack reaches the API endpoint of the cluster it creates (stack/endpoint_access.py),
over every shipped stack and both routes: a laptop outside the VPC, and the deploy workflow's runner."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from stack.config import StackConfig
from stack.endpoint_access import (
    OWN_CIDR_FIX,
    Path,
    Route,
    endpoint_problems,
    fix_for,
    paths,
    route_of,
    unreachable_problem,
)
from stack.fields import NAMESPACE, ConfigError
from stack.files import load_stack_config, raw_stack_config, stack_names
from stack.parse import parse_stack_config

CLUSTER = f"{NAMESPACE}:cluster"
NETWORK = f"{NAMESPACE}:network"
RUNNER = ["203.0.113.16/28"]  # a runner's fixed egress (DEPLOY_RUNNER_CIDRS), a documentation range
LAPTOP = "198.51.100.7/32"
EXISTING_VPC = {
    "vpcId": "vpc-0123456789abcdef0",
    "privateSubnetIds": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
    "gpuSubnetId": "subnet-0123456789abcdef0",
}
BOUNDARY = "arn:aws:iam::123456789012:policy/fsdp-eks-role-boundary"


def _config(stack: str, cluster: dict[str, Any] | None = None, network: dict[str, Any] | None = None) -> StackConfig:
    raw = raw_stack_config(stack)
    if cluster is not None:
        raw[CLUSTER] = {**(raw.get(CLUSTER) or {}), **cluster}
    if network is not None:
        raw[NETWORK] = {**(raw.get(NETWORK) or {}), **network}
    return parse_stack_config(raw, stack)


def _as_ci(config: StackConfig) -> StackConfig:
    return dataclasses.replace(config, cluster=dataclasses.replace(config.cluster, role_permissions_boundary=BOUNDARY))


@pytest.mark.parametrize("stack", stack_names())
@pytest.mark.parametrize("route", list(Route))
def test_every_shipped_stack_as_shipped_is_refused_for_a_new_cluster_with_the_routes_own_fix(
    stack: str, route: Route
) -> None:
    """No shipped stack names an address (it is the user's own), so a new cluster of each is refused before any
    resource, naming the setting and the line that opens the endpoint to that route only."""
    config = load_stack_config(stack)
    assert not config.cluster.existing and paths(config) == {}
    deployer = RUNNER if route is Route.CI else None
    problem = unreachable_problem(config, route, deployer)
    assert problem is not None
    assert problem.startswith(f"{CLUSTER}.endpointPublicAccess: False is not allowed for a new cluster")
    assert fix_for(route, deployer or ()) in problem
    assert "0.0.0.0/0" not in problem


@pytest.mark.parametrize("stack", stack_names())
@pytest.mark.parametrize("route", list(Route))
def test_every_shipped_stack_with_the_routes_address_is_reached(stack: str, route: Route) -> None:
    own = RUNNER if route is Route.CI else [LAPTOP]
    config = _config(stack, {"endpointPublicAccess": True, "publicAccessCidrs": own})
    assert paths(config) == {Path.PUBLIC: own}
    assert unreachable_problem(config, route, RUNNER if route is Route.CI else None) is None


@pytest.mark.parametrize("stack", stack_names())
def test_a_runner_outside_the_stacks_cidrs_is_refused_naming_its_egress(stack: str) -> None:
    config = _config(stack, {"endpointPublicAccess": True, "publicAccessCidrs": [LAPTOP]})
    problem = unreachable_problem(config, Route.CI, RUNNER)
    assert problem is not None and RUNNER[0] in problem and "DEPLOY_RUNNER_CIDRS" in problem
    assert f"pulumi config set --path '{CLUSTER}.publicAccessCidrs[0]' {RUNNER[0]}" in problem
    wider = _config(stack, {"endpointPublicAccess": True, "publicAccessCidrs": [LAPTOP, "203.0.113.0/24"]})
    assert unreachable_problem(wider, Route.CI, RUNNER) is None  # inside a listed network


def test_the_private_endpoint_is_a_route_only_from_a_network_routed_to_an_existing_vpc() -> None:
    routed = ["10.20.0.0/16"]  # a VPN's or a peered VPC's network, or a runner's subnet in the VPC
    in_existing = _config("p5-2", {"privateAccessCidrs": routed}, EXISTING_VPC)
    assert paths(in_existing) == {Path.PRIVATE: routed}
    assert unreachable_problem(in_existing, Route.LAPTOP) is None
    assert unreachable_problem(in_existing, Route.CI, ["10.20.4.0/24"]) is None
    assert unreachable_problem(in_existing, Route.CI, RUNNER) is not None
    in_new = _config("p5-2", {"privateAccessCidrs": routed})
    problem = unreachable_problem(in_new, Route.LAPTOP)
    assert problem is not None and "nothing can be routed into the VPC this same pulumi up creates" in problem


def test_an_existing_cluster_is_not_the_stacks_to_judge() -> None:
    config = load_stack_config("p5-2")
    config = dataclasses.replace(config, cluster=dataclasses.replace(config.cluster, existing=True))
    assert unreachable_problem(config, Route.LAPTOP) is None and unreachable_problem(config, Route.CI, RUNNER) is None


def test_a_stack_that_names_the_boundary_is_deployed_by_ci() -> None:
    config = load_stack_config("p5-2")
    assert route_of(config) is Route.LAPTOP and route_of(_as_ci(config)) is Route.CI


@pytest.mark.parametrize("key", ["publicAccessCidrs", "privateAccessCidrs"])
def test_nothing_opens_the_endpoint_to_the_whole_internet(key: str) -> None:
    with pytest.raises(ConfigError) as refused:
        _config("p5-2", {"endpointPublicAccess": key == "publicAccessCidrs", key: ["0.0.0.0/0"]}, EXISTING_VPC)
    (problem,) = refused.value.problems
    assert problem.startswith(f"{CLUSTER}.{key}: '0.0.0.0/0' is not allowed") and OWN_CIDR_FIX in problem


def test_a_public_endpoint_without_cidrs_is_refused_without_suggesting_the_whole_internet() -> None:
    with pytest.raises(ConfigError) as refused:
        _config("p5-2", {"endpointPublicAccess": True})
    (problem,) = refused.value.problems
    assert "publicAccessCidrs: [] is not allowed" in problem and OWN_CIDR_FIX in problem and "0.0.0.0/0" not in problem


def test_private_cidrs_are_refused_on_a_cluster_the_stack_does_not_manage() -> None:
    config = load_stack_config("p5-2")
    existing = dataclasses.replace(
        config, cluster=dataclasses.replace(config.cluster, existing=True, private_access_cidrs=["10.0.0.0/8"])
    )
    (problem,) = endpoint_problems(existing)
    assert problem.startswith(f"{CLUSTER}.privateAccessCidrs: ['10.0.0.0/8'] is not allowed with cluster.existing")
