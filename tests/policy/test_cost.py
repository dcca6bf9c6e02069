"""Advisory: the stack's GPU nodes per hour against a configurable budget."""

from __future__ import annotations

from policy.cost import DEFAULT_MAX_COST_PER_HOUR, budget_violations, stack_cost
from policy.props import UNKNOWN, StackResource
from sizing.catalog import CATALOG
from stack.price_list import PRICE_TAG_KEY
from tests.policy.examples import NODE_GROUP, launch_template, node_group, node_group_resources

STACK = "urn:pulumi:s::fsdp-eks::"


COMPONENT = "fsdp-eks:infra:GpuNodeGroup$eks:index:ManagedNodeGroup"


def _group(instance_type: str, nodes: int, name: str = "gpu-nodes") -> StackResource:
    return StackResource(NODE_GROUP, f"{STACK}{COMPONENT}${NODE_GROUP}::{name}", node_group(instance_type, nodes))


def _system(nodes: int = 2) -> StackResource:
    props = {"instanceTypes": ["m6i.2xlarge"], "scalingConfig": {"desiredSize": float(nodes)}}
    return StackResource(NODE_GROUP, f"{STACK}eks:index:ManagedNodeGroup${NODE_GROUP}::system", props)


def test_a_stack_within_budget_passes() -> None:
    assert budget_violations([_group("p5.48xlarge", 2), _system()], {"maxCostPerHour": 1000}) == []


def test_a_stack_over_budget_says_what_it_costs() -> None:
    [(urn, message)] = budget_violations([_group("p5.48xlarge", 16)], {"maxCostPerHour": 1000})
    total = 16 * CATALOG["p5.48xlarge"].price_per_hour_usd
    assert urn is None and f"${total:,.2f}/hour" in message and "16 x p5.48xlarge" in message


def test_the_default_budget_applies_without_config() -> None:
    nodes = int(DEFAULT_MAX_COST_PER_HOUR // CATALOG["p5.48xlarge"].price_per_hour_usd) + 1
    assert budget_violations([_group("p5.48xlarge", nodes)], {})


def test_the_teams_own_prices_replace_list_prices() -> None:
    config = {"maxCostPerHour": 1000, "pricePerHour": {"p5.48xlarge": 50.0}}
    assert budget_violations([_group("p5.48xlarge", 16)], config) == []


def test_cpu_system_nodes_are_outside_the_estimate() -> None:
    assert stack_cost([_system(20)], {}) == []


def test_the_aws_node_group_is_what_is_counted_not_the_pulumi_eks_component() -> None:
    """The engine shows the ManagedNodeGroup component with no inputs; given inputs anyway, it is still not
    counted, so the child's nodes are counted exactly once."""
    component = StackResource(
        "eks:index:ManagedNodeGroup", f"{STACK}{COMPONENT}::gpu-nodes", node_group("p5.48xlarge", 4)
    )
    assert [c.nodes for c in stack_cost([component, _group("p5.48xlarge", 4)], {})] == [4]


def test_a_size_unknown_during_preview_is_left_out() -> None:
    group = _group("p5.48xlarge", 4)
    unknown = StackResource(group.type, group.urn, {**group.props, "scalingConfig": UNKNOWN})
    assert stack_cost([unknown], {}) == []


def test_a_capacity_block_group_is_priced_by_the_type_its_launch_template_names() -> None:
    template, group = node_group_resources("p5.48xlarge")
    block = StackResource(
        group.type,
        group.urn,
        {k: v for k, v in node_group("p5.48xlarge", 16).items() if k != "instanceTypes"},
        dependencies=group.dependencies,
        property_dependencies=group.property_dependencies,
    )
    in_template = StackResource(template.type, template.urn, {**launch_template(), "instanceType": "p5.48xlarge"})
    assert [(c.instance_type, c.nodes) for c in stack_cost([in_template, block], {})] == [("p5.48xlarge", 16)]
    assert stack_cost([template, block], {}) == []  # no type anywhere: EKS's default, outside the catalog


def _priced(instance_type: str, nodes: int, tag: object) -> StackResource:
    group = _group(instance_type, nodes)
    return StackResource(group.type, group.urn, {**group.props, "tags": {PRICE_TAG_KEY: tag}})


def test_the_price_the_preview_read_from_the_price_list_is_budgeted_with() -> None:
    """The program tags the GPU node group with the price it read from AWS's Price List API (stack/price_list.py): a
    16-node p5 fleet at a current price passes a budget the catalog's older list price would break."""
    assert budget_violations([_group("p5.48xlarge", 16)], {"maxCostPerHour": 1000})
    assert budget_violations([_priced("p5.48xlarge", 16, "55.04")], {"maxCostPerHour": 1000}) == []
    [cost] = stack_cost([_priced("p5.48xlarge", 16, "55.04")], {})
    assert cost.price_per_node_hour == 55.04


def test_the_teams_own_price_wins_over_the_tag_and_an_unreadable_tag_falls_back_to_the_catalog() -> None:
    [cost] = stack_cost([_priced("p5.48xlarge", 2, "55.04")], {"p5.48xlarge": 40.0})
    assert cost.price_per_node_hour == 40.0
    for tag in (UNKNOWN, "n/a"):
        [cost] = stack_cost([_priced("p5.48xlarge", 2, tag)], {})
        assert cost.price_per_node_hour == CATALOG["p5.48xlarge"].price_per_hour_usd
