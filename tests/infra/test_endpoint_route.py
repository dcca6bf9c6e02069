"""The program refuses a new cluster whose API endpoint the deploying route cannot reach, in the preview that would
create it (before any resource exists), and opens the private endpoint's port to the networks routed to an existing
VPC (stack/endpoint_access.py, infra/cluster.py)."""

from __future__ import annotations

import pytest

from stack.endpoint_access import API_PORT, OWN_CIDR_FIX
from stack.fields import NAMESPACE
from stack.files import raw_stack_config
from tests.harness.pulumi_program import run_program

pytestmark = pytest.mark.program  # every test here runs __main__.py under the mocks

STACK = "p5-2"
CLUSTER = f"{NAMESPACE}:cluster"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"


def test_the_first_preview_of_an_unreachable_cluster_fails_naming_the_setting_and_the_fix() -> None:
    first = run_program(STACK, preview="first", deployable=False)
    assert first.error is not None and first.error["kind"] == "ConfigError", first.error
    (problem,) = first.error["problems"]
    assert problem.startswith(f"{CLUSTER}.endpointPublicAccess: False is not allowed for a new cluster")
    assert OWN_CIDR_FIX in problem


def test_a_cluster_that_exists_is_previewed_with_the_one_line_that_reaches_it() -> None:
    """Its endpoint may be reached from a network routed to the VPC since: the stack says how, and refuses nothing."""
    update = run_program(STACK)
    assert update.error is None, update.error
    assert any(OWN_CIDR_FIX in warning for warning in update.warnings())


def test_networks_routed_to_an_existing_vpc_reach_the_private_endpoint_on_its_port() -> None:
    raw = raw_stack_config(STACK)
    network = {
        "vpcId": "vpc-0123456789abcdef0",
        "privateSubnetIds": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
        "gpuSubnetId": "subnet-0123456789abcdef0",
    }
    routed = "10.20.0.0/16"
    overrides = {
        f"{NAMESPACE}:network": network,
        CLUSTER: {**(raw.get(CLUSTER) or {}), "privateAccessCidrs": [routed]},
    }
    run = run_program(STACK, overrides, preview="first", deployable=False)
    assert run.error is None, run.error
    (rule,) = [r for r in run.of_type(INGRESS) if r.inputs.get("cidrIpv4") == routed]
    assert (rule.inputs["fromPort"], rule.inputs["toPort"], rule.inputs["ipProtocol"]) == (API_PORT, API_PORT, "tcp")
    # On the group EKS creates for the control plane, read from the cluster, not one of pulumi-eks's.
    eks_cluster = run_program(STACK, overrides).one("eks:index:Cluster")
    updated = [r for r in run_program(STACK, overrides).of_type(INGRESS) if r.inputs.get("cidrIpv4") == routed]
    assert (
        updated[0].inputs["securityGroupId"] == eks_cluster.outputs["eksCluster"]["vpcConfig"]["clusterSecurityGroupId"]
    )
    assert not any("is private" in warning for warning in run.warnings())
