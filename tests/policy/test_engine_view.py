"""The engine's view of the program, which the pack's tests run against: remote components without inputs, their
children as their providers register them, unknowns where a first preview has them."""

from __future__ import annotations

import dataclasses
import json

import pytest
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

from stack.files import load_stack_config, raw_stack_config
from tests.harness.fake_eks import ProviderRefusalError
from tests.harness.pulumi_program import ProgramRun, run_program
from tests.policy.engine import analyze_view
from tests.policy.engine_view import AnalyzedResource, engine_view
from tests.policy.remote_children import CHILD_MODELS, NOT_MODELED, NotModeledError, children

pytestmark = pytest.mark.program  # every test here runs __main__.py under the mocks

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
SUBNET = "aws:ec2/subnet:Subnet"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
ROLE = "aws:iam/role:Role"


def _first(stack: str) -> ProgramRun:
    run = run_program(stack, preview="first")
    assert run.error is None, run.error
    return run


def _gpu_group(view: list[AnalyzedResource]) -> AnalyzedResource:
    return next(r for r in view if r.type == NODE_GROUP and r.name == "gpu-nodes")


def _template_of(group: AnalyzedResource, view: list[AnalyzedResource]) -> AnalyzedResource:
    (urn,) = group.property_dependencies["launchTemplate"]
    return next(r for r in view if r.urn == urn)


def test_every_remote_component_of_every_stack_is_modeled_or_explained(stack_run: ProgramRun) -> None:
    remote = {r.type for r in _first(stack_run.stack).resources if r.remote}
    assert remote and remote <= set(CHILD_MODELS) | set(NOT_MODELED)
    engine_view(_first(stack_run.stack).resources)  # every model follows every stack's options


def test_a_remote_component_reaches_the_pack_without_inputs_and_its_child_with_them() -> None:
    view = engine_view(_first("p5-16").resources)
    components = [r for r in view if r.type == "eks:index:ManagedNodeGroup"]
    assert len(components) == 2 and all(r.inputs == {} for r in components)
    group = _gpu_group(view)
    assert group.inputs["instanceTypes"] == ["p5.48xlarge"]
    assert group.inputs["scalingConfig"]["desiredSize"] == load_stack_config("p5-16").gpu_nodes.count
    assert group.parent == next(c.urn for c in components if c.name == "gpu-nodes")


def test_on_a_first_preview_the_subnet_ids_are_unknown_and_lead_to_the_subnet() -> None:
    view = engine_view(_first("p5-16").resources)
    group, by_urn = _gpu_group(view), {r.urn: r for r in view}
    assert group.inputs["subnetIds"] == UNKNOWN_STRING_VALUE
    (subnet,) = [by_urn[u] for u in group.property_dependencies["subnetIds"]]
    assert subnet.type == SUBNET
    assert subnet.props["availabilityZone"] == load_stack_config("p5-16").gpu_availability_zone
    template = by_urn[group.property_dependencies["launchTemplate"][0]]
    assert template.type == "aws:ec2/launchTemplate:LaunchTemplate"
    assert group.inputs["launchTemplate"]["id"] == UNKNOWN_STRING_VALUE


@pytest.mark.parametrize("preview", ["first", "update"])
def test_each_node_group_keeps_its_name_prefix_and_the_programs_launch_template(preview: str) -> None:
    view = engine_view(run_program("p5-2", preview=preview).resources)
    groups = {r.name: r for r in view if r.type == NODE_GROUP}
    assert set(groups) == {"gpu-nodes", "cluster-system"}
    templates = {name: _template_of(group, view).name for name, group in groups.items()}
    assert templates == {"gpu-nodes": "gpu-template", "cluster-system": "cluster-system-template"}
    for name, group in groups.items():
        assert group.inputs["nodeGroupNamePrefix"].endswith(f"-{name.removeprefix('cluster-').removesuffix('-nodes')}-")
        # With a launch template of the program's, pulumi-eks does not pin the group to the cluster's version: the
        # program does (infra/cluster.py), or the nodes would stay behind a Kubernetes upgrade.
        assert "version" in group.inputs
    assert not any(r.type == LAUNCH_TEMPLATE and r.parent in {g.urn for g in groups.values()} for r in view)


def test_a_capacity_block_group_has_no_instance_types_and_its_template_names_the_type() -> None:
    gpu = raw_stack_config("p5-2")["fsdp-eks:gpuNodes"]
    block = gpu | {"capacityType": "CAPACITY_BLOCK", "capacityReservationId": "cr-0123456789abcdef1"}
    run = run_program("p5-2", {"fsdp-eks:gpuNodes": block}, preview="first")
    assert run.error is None, run.error
    view = engine_view(run.resources)
    group = _gpu_group(view)
    assert "instanceTypes" not in group.inputs and group.inputs["capacityType"] == "CAPACITY_BLOCK"
    assert _template_of(group, view).inputs["instanceType"] == "p5.48xlarge"


def test_on_an_update_preview_the_subnet_ids_are_known() -> None:
    group = _gpu_group(engine_view(run_program("p5-16").resources))
    assert isinstance(group.inputs["subnetIds"], list) and len(group.inputs["subnetIds"]) == 1
    assert group.inputs["subnetIds"][0] != UNKNOWN_STRING_VALUE


def _system_group():
    return next(r for r in _first("p5-2").resources if r.type == "eks:index:ManagedNodeGroup" and r.name != "gpu-nodes")


def test_pulumi_eks_builds_its_own_launch_template_for_enable_imdsv2_and_the_pack_judges_it() -> None:
    component = _system_group()
    inputs = {k: v for k, v in component.inputs.items() if k not in ("launchTemplate", "version")}
    inputs |= {"enableIMDSv2": False}
    built, _ = children(component, inputs)
    template = next(c for c in built if c.type == "aws:ec2/launchTemplate:LaunchTemplate")
    assert template.inputs["metadataOptions"]["httpTokens"] == "optional"
    # Without a launch template of the program's, the group takes the cluster's version (unknown to the view).
    assert next(c for c in built if c.type == NODE_GROUP).inputs["version"] == UNKNOWN_STRING_VALUE
    view = engine_view([dataclasses.replace(component, inputs=inputs)])
    # IMDSv1 allowed, and pulumi-eks's hop limit of 2 (nodejs/eks/nodes/nodegroup.ts) lets pods reach the node role.
    assert {v.policy for v in analyze_view(view)} == {"launch-template-imdsv2", "launch-template-imds-hop-limit"}


@pytest.mark.parametrize(
    "component_type,option",
    [
        # pulumi-eks accepts enableEfaSupport only without a launch template of the program's.
        ("eks:index:ManagedNodeGroup", {"enableEfaSupport": True, "launchTemplate": None}),
        ("eks:index:Cluster", {"skipDefaultNodeGroup": False}),
    ],
)
def test_an_option_the_models_do_not_follow_fails_loudly(component_type: str, option: dict) -> None:
    component = next(r for r in _first("p5-2").resources if r.type == component_type)
    with pytest.raises(NotModeledError):
        children(component, {**component.inputs, **option})


def test_pulumi_eks_refuses_a_custom_template_option_beside_the_programs_launch_template() -> None:
    component = _system_group()
    assert component.inputs["launchTemplate"]
    with pytest.raises(ProviderRefusalError, match="custom launch template"):
        children(component, {**component.inputs, "enableIMDSv2": True})


def test_pulumi_eks_makes_the_clusters_service_role_with_a_trust_policy_known_on_a_first_preview() -> None:
    """Without a `serviceRole` of the program's, pulumi-eks's Cluster makes `<name>-eksRole` (nodejs/eks/cluster/
    cluster.ts): a ServiceRole component and its aws.iam.Role, whose trust policy names eks.amazonaws.com from a
    literal, so a first preview shows it known and the trust policy passes."""
    cluster = next(r for r in _first("p5-2").resources if r.type == "eks:index:Cluster")
    view = engine_view([dataclasses.replace(cluster, inputs={**cluster.inputs, "serviceRole": None})])
    (role,) = [r for r in view if r.type == ROLE]
    assert role.name == f"{cluster.name}-eksRole-role" and role.parent == cluster.urn
    assert json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]["Principal"] == {
        "Service": ["eks.amazonaws.com"]
    }
    assert analyze_view(view) == []
    given = engine_view([dataclasses.replace(cluster, inputs={**cluster.inputs, "serviceRole": "urn:role"})])
    assert not any(r.type == ROLE for r in given)
