"""GPU capacity as EKS and EC2 accept it: capacity blocks, reservations without room for a rolling update, an ODCR
inside an existing placement group, and node groups that can be replaced without a name collision."""

from __future__ import annotations

import pytest

from stack.files import raw_stack_config
from tests.harness.pulumi_program import ProgramRun, run_program

pytestmark = pytest.mark.program  # every test here runs __main__.py under the mocks

GPU = "fsdp-eks:gpuNodes"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
NODE_GROUP = "eks:index:ManagedNodeGroup"
BLOCK = "cr-0123456789abcdef1"


def _with_gpu(stack: str, **settings: object) -> ProgramRun:
    run = run_program(stack, {GPU: raw_stack_config(stack)[GPU] | settings})
    assert run.error is None, run.error
    return run


def test_a_capacity_block_names_its_instance_type_in_the_launch_template_only() -> None:
    run = _with_gpu("p5-2", capacityType="CAPACITY_BLOCK", capacityReservationId=BLOCK)
    template = run.named(TEMPLATE, "gpu-template").inputs
    assert template["instanceType"] == "p5.48xlarge"
    assert template["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert template["capacityReservationSpecification"]["capacityReservationTarget"]["capacityReservationId"] == BLOCK
    group = run.named(NODE_GROUP, "gpu-nodes").inputs
    assert group["capacityType"] == "CAPACITY_BLOCK"
    assert "instanceTypes" not in group


def test_on_demand_groups_name_their_type_on_the_node_group_only(stack_run: ProgramRun) -> None:
    for group in stack_run.of_type(NODE_GROUP):
        assert group.inputs["instanceTypes"], group.name
    for template in stack_run.of_type(TEMPLATE):
        assert "instanceType" not in template.inputs, template.name


def test_the_plan_of_a_reserved_capacity_stack_says_how_to_update_its_nodes() -> None:
    odcr = run_program("p4de-16")
    block = _with_gpu("p5-2", capacityType="CAPACITY_BLOCK", capacityReservationId=BLOCK)
    for run, reservation, kind in (
        (odcr, "cr-0123456789abcdef0", "capacity reservation"),
        (block, BLOCK, "capacity block"),
    ):
        (warning,) = [w for w in run.warnings() if reservation in w]
        assert f"{kind} {reservation}" in warning
        assert "Scale to zero first (gpuNodes.count 0 and job.enabled false, then pulumi up)" in warning


def test_the_documented_scale_to_zero_config_is_valid() -> None:
    """What the warning tells a user to set must pass the config checks (a job needs at least one node)."""
    run = run_program(
        "p4de-16", {GPU: raw_stack_config("p4de-16")[GPU] | {"count": 0}, "fsdp-eks:job": {"enabled": False}}
    )
    assert run.error is None, run.error
    assert int(run.named(NODE_GROUP, "gpu-nodes").inputs["scalingConfig"]["desiredSize"]) == 0


def test_the_plan_of_an_on_demand_stack_has_no_such_warning() -> None:
    assert not [w for w in run_program("p5-2").warnings() if "capacity" in w]


def test_an_odcr_in_an_existing_placement_group_launches_into_that_group() -> None:
    run = _with_gpu("p4de-16", placementGroupName="training-pg")
    assert run.of_type("aws:ec2/placementGroup:PlacementGroup") == []
    assert run.named(TEMPLATE, "gpu-template").inputs["placement"] == {"groupName": "training-pg"}


def test_node_groups_are_named_by_prefix_so_a_replacement_does_not_collide(stack_run: ProgramRun) -> None:
    cluster_name = stack_run.outputs["clusterName"]
    prefixes = {g.name: g.inputs.get("nodeGroupNamePrefix") for g in stack_run.of_type(NODE_GROUP)}
    assert prefixes == {"cluster-system": f"{cluster_name}-system-", "gpu-nodes": f"{cluster_name}-gpu-"}
    for group in stack_run.of_type(NODE_GROUP):
        assert "nodeGroupName" not in group.inputs, group.name
