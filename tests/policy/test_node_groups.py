"""GPU node groups and launch templates: EFA on every network card, one AZ, IMDSv2 with a hop limit of 1; what a
check cannot see is "not checked", never a pass."""

from __future__ import annotations

import pytest

from policy.node_groups import (
    efa_layout_violations,
    efa_node_group_violations,
    efa_stack_violations,
    imds_hop_limit_violations,
    imdsv2_violations,
    single_az_stack_violations,
)
from policy.props import NOT_CHECKED, UNKNOWN, StackResource
from sizing.catalog import CATALOG
from tests.policy.examples import (
    GROUP_URN,
    NODE_GROUP,
    efa_interfaces,
    launch_template,
    node_group,
    node_group_resources,
)

LT = "aws:ec2/launchTemplate:LaunchTemplate"
MNG = "eks:index:ManagedNodeGroup"
SUBNET = "aws:ec2/subnet:Subnet"
EFA_TYPES = sorted(name for name, t in CATALOG.items() if t.supports_efa)


@pytest.mark.parametrize("instance_type", EFA_TYPES)
def test_the_programs_efa_layout_passes_for_every_efa_type(instance_type: str) -> None:
    assert efa_layout_violations(CATALOG[instance_type], launch_template(instance_type)) == []


def test_a_missing_network_card_is_named() -> None:
    template = launch_template("p5.48xlarge")
    template["networkInterfaces"] = [i for i in template["networkInterfaces"] if i["networkCardIndex"] != 7.0]
    (problem,) = efa_layout_violations(CATALOG["p5.48xlarge"], template)
    assert "card(s) 7" in problem and "32 network cards" in problem


def test_a_template_with_a_quarter_of_the_cards_reports_the_missing_range() -> None:
    template = {"networkInterfaces": efa_interfaces("p5.48xlarge")[:8]}
    (problem,) = efa_layout_violations(CATALOG["p5.48xlarge"], template)
    assert "card(s) 8-31" in problem


def test_two_efa_interfaces_on_one_card_fail() -> None:
    template = launch_template("p4d.24xlarge")
    template["networkInterfaces"][1]["networkCardIndex"] = 2.0
    problems = efa_layout_violations(CATALOG["p4d.24xlarge"], template)
    assert any("more than one EFA" in p for p in problems) and any("card(s) 1" in p for p in problems)


def test_efa_only_fails_on_a_type_without_it() -> None:
    template = launch_template("p4d.24xlarge")
    template["networkInterfaces"][1].update(interfaceType="efa-only", deviceIndex=0.0)
    assert any("does not support 'efa-only'" in p for p in efa_layout_violations(CATALOG["p4d.24xlarge"], template))


def test_an_efa_only_primary_interface_fails() -> None:
    template = launch_template("p5.48xlarge")
    template["networkInterfaces"][0]["interfaceType"] = "efa-only"
    assert any("primary interface" in p for p in efa_layout_violations(CATALOG["p5.48xlarge"], template))


def test_plain_ena_interfaces_do_not_count_as_efa() -> None:
    template = launch_template("g6e.48xlarge")
    for interface in template["networkInterfaces"]:
        interface["interfaceType"] = "interface"
    assert "card(s) 0-3" in efa_layout_violations(CATALOG["g6e.48xlarge"], template)[0]


def test_a_template_without_interfaces_fails_for_an_efa_type() -> None:
    (problem,) = efa_layout_violations(CATALOG["p5.48xlarge"], {"metadataOptions": {"httpTokens": "required"}})
    assert "no network interfaces" in problem


def test_an_efa_node_group_without_a_launch_template_fails() -> None:
    group = node_group("p5.48xlarge")
    del group["launchTemplate"]
    assert "no launch template" in efa_node_group_violations(group, None)[0]


def test_node_groups_of_types_without_efa_need_no_efa() -> None:
    assert efa_node_group_violations(node_group("g6e.xlarge"), {}) == []
    assert efa_node_group_violations({"instanceTypes": ["m6i.2xlarge"]}, None) == []


def test_interfaces_unknown_during_preview_are_not_checked() -> None:
    (problem,) = efa_layout_violations(CATALOG["p5.48xlarge"], {"networkInterfaces": UNKNOWN})
    assert problem.startswith(NOT_CHECKED) and "network interfaces" in problem


@pytest.mark.parametrize("key", ["interfaceType", "networkCardIndex", "deviceIndex"])
def test_an_interface_whose_card_or_kind_is_unknown_is_not_checked(key: str) -> None:
    template = launch_template("p5.48xlarge")
    template["networkInterfaces"][3][key] = UNKNOWN
    (problem,) = efa_layout_violations(CATALOG["p5.48xlarge"], template)
    assert problem.startswith(NOT_CHECKED) and "interface(s) 3" in problem


def test_an_efa_group_whose_template_is_not_in_the_stack_is_not_checked() -> None:
    (problem,) = efa_node_group_violations(node_group("p5.48xlarge"), None)
    assert problem.startswith(NOT_CHECKED) and "launch template" in problem


@pytest.mark.parametrize(
    "change",
    [
        {"instanceTypes": UNKNOWN},
        {"instanceTypes": [UNKNOWN]},
    ],
)
def test_a_group_whose_instance_type_is_unknown_is_not_checked(change: dict) -> None:
    group = {**node_group("p5.48xlarge"), **change}
    (problem,) = efa_node_group_violations(group, launch_template("p5.48xlarge"))
    assert problem.startswith(NOT_CHECKED) and "instance type" in problem
    [(_, problem)] = single_az_stack_violations([_group(group)])
    assert problem.startswith(NOT_CHECKED) and "instance type" in problem


def test_a_capacity_block_group_whose_template_type_is_unknown_is_not_checked() -> None:
    group = {k: v for k, v in node_group("p5.48xlarge").items() if k != "instanceTypes"}
    template = {**launch_template("p5.48xlarge"), "instanceType": UNKNOWN}
    assert efa_node_group_violations(group, template)[0].startswith(NOT_CHECKED)
    assert efa_node_group_violations(group, {**template, "instanceType": "p5.48xlarge"}) == []


def test_a_group_with_neither_types_nor_template_is_the_default_cpu_type() -> None:
    """EKS' default t3.medium: known, and not an EFA type."""
    assert efa_node_group_violations({"subnetIds": ["a", "b"]}, None) == []


def test_the_stack_check_finds_the_template_through_the_launch_template_input() -> None:
    assert efa_stack_violations(node_group_resources("p5.48xlarge")) == []
    broken = node_group_resources("p5.48xlarge", template={"networkInterfaces": efa_interfaces("p5.48xlarge")[:1]})
    [(urn, problem)] = efa_stack_violations(broken)
    assert urn == GROUP_URN and "card(s) 1-31" in problem


def test_the_stack_check_falls_back_to_plain_dependencies() -> None:
    broken = node_group_resources("p5.48xlarge", template={"networkInterfaces": []}, via_property_dependencies=False)
    assert len(efa_stack_violations(broken)) == 1


def test_imdsv2_required_passes() -> None:
    assert imdsv2_violations(LT, launch_template()) == []


@pytest.mark.parametrize("metadata", [{"httpTokens": "optional"}, {"httpEndpoint": "enabled"}, None])
def test_imdsv1_allowed_or_unset_fails(metadata: dict | None) -> None:
    (problem,) = imdsv2_violations(LT, {"metadataOptions": metadata})
    assert "httpTokens" in problem and not problem.startswith(NOT_CHECKED)


@pytest.mark.parametrize("metadata", [UNKNOWN, {"httpTokens": UNKNOWN}])
def test_imds_tokens_unknown_during_preview_are_not_checked(metadata: object) -> None:
    (problem,) = imdsv2_violations(LT, {"metadataOptions": metadata})
    assert problem.startswith(NOT_CHECKED) and "httpTokens" in problem


def test_imds_policies_concern_launch_templates_and_node_groups_only() -> None:
    for check in (imdsv2_violations, imds_hop_limit_violations):
        assert check(MNG, {}) == []
        assert check(NODE_GROUP, node_group()) == []


def test_hop_limit_one_passes() -> None:
    assert imds_hop_limit_violations(LT, launch_template()) == []
    assert imds_hop_limit_violations(LT, {"metadataOptions": {"httpPutResponseHopLimit": 1}}) == []


@pytest.mark.parametrize("limit", [2.0, 3, 64.0])
def test_a_hop_limit_a_pod_can_cross_fails(limit: float) -> None:
    (problem,) = imds_hop_limit_violations(
        LT, {"metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": limit}}
    )
    assert "httpPutResponseHopLimit" in problem and not problem.startswith(NOT_CHECKED)


@pytest.mark.parametrize(
    "metadata,state",
    [
        ({"httpTokens": "required"}, "not set"),
        (None, "not set"),
        ({"httpTokens": "required", "httpPutResponseHopLimit": UNKNOWN}, "unknown"),
        (UNKNOWN, "unknown"),
    ],
)
def test_a_hop_limit_unset_or_unknown_is_not_checked(metadata: object, state: str) -> None:
    (problem,) = imds_hop_limit_violations(LT, {"metadataOptions": metadata})
    assert problem.startswith(NOT_CHECKED) and state in problem


def test_a_node_group_without_a_launch_template_has_imds_options_the_pack_cannot_see() -> None:
    group = {k: v for k, v in node_group().items() if k != "launchTemplate"}
    for check in (imdsv2_violations, imds_hop_limit_violations):
        (problem,) = check(NODE_GROUP, group)
        assert problem.startswith(NOT_CHECKED) and "no launch template" in problem


def _group(props: dict, subnet_deps: tuple[str, ...] = (), type_token: str = NODE_GROUP) -> StackResource:
    return StackResource(type_token, GROUP_URN, props, property_dependencies={"subnetIds": subnet_deps})


def _subnet(name: str, zone: str) -> StackResource:
    return StackResource(
        SUBNET, f"urn:pulumi:s::fsdp-eks::aws:ec2/subnet:Subnet::{name}", {"availabilityZone": zone, "vpcId": UNKNOWN}
    )


def test_an_efa_node_group_in_one_subnet_passes() -> None:
    assert single_az_stack_violations([_group(node_group("p5.48xlarge", subnets=1))]) == []


def test_an_efa_node_group_over_two_subnets_fails() -> None:
    [(urn, problem)] = single_az_stack_violations([_group(node_group("p4de.24xlarge", subnets=2))])
    assert urn == GROUP_URN and "2 subnets" in problem


def test_cpu_node_groups_may_span_azs() -> None:
    assert single_az_stack_violations([_group({"instanceTypes": ["m6i.2xlarge"], "subnetIds": ["a", "b"]})]) == []


def test_the_pulumi_eks_component_is_not_a_node_group_to_the_pack() -> None:
    """The engine shows pulumi-eks's ManagedNodeGroup without inputs; only its aws:eks NodeGroup child counts."""
    assert single_az_stack_violations([_group(node_group("p5.48xlarge", subnets=3), type_token=MNG)]) == []


def test_on_a_first_preview_the_subnets_it_is_built_from_are_counted() -> None:
    group = {**node_group("p5.48xlarge"), "subnetIds": UNKNOWN}
    a, b = _subnet("a", "us-east-1a"), _subnet("b", "us-east-1b")
    assert single_az_stack_violations([a, _group(group, (a.urn,))]) == []
    [(_, problem)] = single_az_stack_violations([a, b, _group(group, (a.urn, b.urn))])
    assert "2 subnets" in problem and "us-east-1a, us-east-1b" in problem


def test_unknown_subnets_the_stack_does_not_create_are_reported_as_not_checked() -> None:
    group = {**node_group("p5.48xlarge"), "subnetIds": UNKNOWN}
    [(_, problem)] = single_az_stack_violations([_group(group)])
    assert problem.startswith("not checked")
