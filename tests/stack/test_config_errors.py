"""Every invalid value fails the program before any resource is registered, naming the key, value and what is
allowed."""

from __future__ import annotations

import pytest

from tests.harness.pulumi_program import run_program

pytestmark = pytest.mark.program  # every test here runs __main__.py under the mocks

GPU = "fsdp-eks:gpuNodes"
NET = "fsdp-eks:network"
CLUSTER = "fsdp-eks:cluster"

INVALID = {
    "unknown instance type": ({GPU: {"instanceType": "p9.96xlarge"}}, "gpuNodes.instanceType: 'p9.96xlarge'"),
    "negative count": ({GPU: {"count": -1}}, "gpuNodes.count: -1"),
    "count not a number": ({GPU: {"count": "many"}}, "gpuNodes.count: 'many'"),
    "AZ of another region": ({GPU: {"availabilityZone": "eu-west-1a"}}, "gpuNodes.availabilityZone: 'eu-west-1a'"),
    "AZ not in the network": (
        {GPU: {"availabilityZone": "us-east-1f"}},
        "gpuNodes.availabilityZone: 'us-east-1f' is not allowed; expected one of the network's AZs us-east-1a, "
        "us-east-1b, or us-east-1f added to fsdp-eks:network.availabilityZones (unset: the region's a and b)",
    ),
    "malformed reservation id": (
        {GPU: {"capacityReservationId": "cr-123", "availabilityZone": "us-east-1a"}},
        "gpuNodes.capacityReservationId: 'cr-123'",
    ),
    "capacity block without reservation": ({GPU: {"capacityType": "CAPACITY_BLOCK"}}, "capacityType CAPACITY_BLOCK"),
    "reservation without AZ": ({GPU: {"capacityReservationId": "cr-0123456789abcdef0"}}, "reservation's AZ"),
    "spot in a reservation": (
        {
            GPU: {
                "capacityType": "SPOT",
                "capacityReservationId": "cr-0123456789abcdef0",
                "availabilityZone": "us-east-1a",
            }
        },
        "gpuNodes.capacityType: 'SPOT'",
    ),
    "unknown capacity type": ({GPU: {"capacityType": "RESERVED"}}, "gpuNodes.capacityType: 'RESERVED'"),
    "EFA on a type without EFA": ({GPU: {"instanceType": "g6e.xlarge", "efa": True}}, "gpuNodes.efa: True"),
    "CIDR too small": ({NET: {"cidr": "10.0.0.0/24"}}, "network.cidr: '10.0.0.0/24' is too small"),
    "CIDR malformed": ({NET: {"cidr": "10.0.0.0/33"}}, "network.cidr: '10.0.0.0/33'"),
    "one AZ only": ({NET: {"availabilityZones": ["us-east-1a"]}}, "network.availabilityZones"),
    "existing VPC without subnets": ({NET: {"vpcId": "vpc-0123456789abcdef0"}}, "network.privateSubnetIds"),
    "malformed VPC id": (
        {
            NET: {
                "vpcId": "vpc-xyz",
                "privateSubnetIds": ["subnet-0123abcd", "subnet-0123abce"],
                "gpuSubnetId": "subnet-0123abcd",
            }
        },
        "network.vpcId: 'vpc-xyz'",
    ),
    "unknown key in a section": ({GPU: {"instanceTyp": "p5.48xlarge"}}, "gpuNodes.instanceTyp: unknown key"),
    "unknown top-level key": ({"fsdp-eks:gpuNode": {"count": 2}}, "fsdp-eks:gpuNode: unknown key"),
    "section not a map": ({GPU: "[1, 2]"}, "fsdp-eks:gpuNodes: [1, 2]"),
    "region missing": ({"aws:region": None}, "aws:region: None"),
    "bad admin role ARN": ({"fsdp-eks:cluster": {"adminRoleArns": ["admin"]}}, "cluster.adminRoleArns: 'admin'"),
    "unsupported Kubernetes version": (
        {"fsdp-eks:cluster": {"kubernetesVersion": "1.20"}},
        "kubernetesVersion: '1.20'",
    ),
    "bad control-plane log type": ({"fsdp-eks:cluster": {"controlPlaneLogs": ["all"]}}, "controlPlaneLogs: 'all'"),
    "public endpoint without CIDRs": (
        {CLUSTER: {"endpointPublicAccess": True}},
        "cluster.publicAccessCidrs: [] is not allowed with endpointPublicAccess true",
    ),
    "CIDRs on a private endpoint": (
        {CLUSTER: {"publicAccessCidrs": ["203.0.113.0/24"]}},
        "cluster.publicAccessCidrs: ['203.0.113.0/24'] is not allowed with endpointPublicAccess false",
    ),
    "placement group name with placementGroup never": (
        {GPU: {"placementGroupName": "pg", "placementGroup": "never"}},
        "gpuNodes.placementGroup: 'never' is not allowed with placementGroupName 'pg'",
    ),
    "FSx on an existing cluster": (
        {CLUSTER: {"existing": True}, "fsdp-eks:storage": {"fsx": True}},
        "storage.fsx: True is not allowed with cluster.existing",
    ),
    "multi-node job on an existing cluster without a claim": (
        {CLUSTER: {"existing": True}},
        "job.checkpointClaim: None is not allowed for a 2-node job on an existing cluster",
    ),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_value_fails_before_any_resource_with_a_named_message(case: str) -> None:
    overrides, expected = INVALID[case]
    run = run_program("p5-2", overrides)
    assert run.error is not None and run.error["kind"] == "ConfigError", run.error
    assert expected in run.error["message"]
    assert "expected" in run.error["message"] or "allowed keys are" in run.error["message"]
    assert run.resources == []


def test_every_problem_is_reported_at_once() -> None:
    run = run_program("p5-2", {GPU: {"count": -1, "instanceType": "nope"}, NET: {"cidr": "10.0.0.0/24"}})
    assert run.error is not None
    assert len(run.error["problems"]) == 3
