"""Advisory: the stack's GPU nodes cost more per hour than the team's budget.

Advisory, not mandatory: a 16-node run is often exactly what was meant; the point is that a PR which turns 2 nodes
into 16 says so in its checks before anyone merges it. The estimate is the one the stack exports
(`estimatedCostPerHour`): GPU nodes x price per node-hour. The price is the team's own from the pack's config, else
the one the program read from AWS's Price List API at this preview (the node group's PRICE_TAG_KEY tag,
stack/price_list.py), else the catalog's dated list price.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policy.node_groups import NODE_GROUP, instance_types, launch_template_of
from policy.props import StackResource, as_int, get, is_unknown
from sizing.catalog import CATALOG
from stack.price_list import PRICE_TAG_KEY

# $/hour. Above the 2-node p5 stacks, below a 16-node p5 fleet (about $1,570/h at list price): a default that makes
# the big stacks say what they cost without failing anything. Teams set their own in the pack's config.
DEFAULT_MAX_COST_PER_HOUR = 1000.0
CONFIG_SCHEMA: dict[str, Any] = {
    "maxCostPerHour": {
        "type": "number",
        "minimum": 0,
        "default": DEFAULT_MAX_COST_PER_HOUR,
        "description": "Budget in USD per hour for the stack's GPU nodes.",
    },
    "pricePerHour": {
        "type": "object",
        "additionalProperties": {"type": "number", "minimum": 0},
        "default": {},
        "description": "USD per node-hour by instance type (reserved or negotiated prices); default: the price the "
        "preview read from AWS's Price List API, else the catalog's on-demand list price.",
    },
}


@dataclass(frozen=True)
class NodeGroupCost:
    urn: str
    instance_type: str
    nodes: int
    price_per_node_hour: float

    @property
    def per_hour(self) -> float:
        return self.nodes * self.price_per_node_hour


def node_group_cost(
    group: StackResource, prices: Mapping[str, float], template: Mapping[str, Any] | None = None
) -> NodeGroupCost | None:
    """What one GPU node group costs per hour at its desired size; None for groups of types with no price (the
    CPU system nodes are outside the catalog and the estimate, as in the stack's own figure). `template`: the
    properties of the group's launch template, where a capacity block names the type."""
    types = instance_types(group.props, template)
    if not types:
        return None
    name = types[0]
    price = prices.get(name, tagged_price(group.props))
    if price is None:
        price = CATALOG[name].price_per_hour_usd if name in CATALOG else None
    scaling = get(group.props, "scalingConfig")
    nodes = as_int(get(scaling, "desiredSize"))
    if nodes is None:
        nodes = as_int(get(scaling, "minSize"))
    if price is None or nodes is None or is_unknown(scaling):
        return None
    return NodeGroupCost(group.urn, name, nodes, float(price))


def tagged_price(props: Mapping[str, Any]) -> float | None:
    """The price per node-hour the program read at this preview, from the node group's tag; None where it has none
    or it is unknown."""
    tags = get(props, "tags")
    value = get(tags, PRICE_TAG_KEY) if isinstance(tags, Mapping) else None
    try:
        return None if value is None or is_unknown(value) else float(value)
    except (TypeError, ValueError):
        return None


def counted_node_groups(resources: Sequence[StackResource]) -> list[StackResource]:
    """The EKS node groups: the aws:eks NodeGroup that carries instance types and sizes. pulumi-eks's
    ManagedNodeGroup around it reaches the pack with no inputs (it is a remote component), so it is never counted."""
    return [r for r in resources if r.type == NODE_GROUP]


def stack_cost(resources: Sequence[StackResource], prices: Mapping[str, float]) -> list[NodeGroupCost]:
    by_urn = {r.urn: r for r in resources}
    costs = []
    for group in counted_node_groups(resources):
        template = launch_template_of(group, by_urn)
        costs.append(node_group_cost(group, prices, template.props if template else None))
    return [c for c in costs if c is not None]


def budget_violations(resources: Sequence[StackResource], config: Mapping[str, Any]) -> list[tuple[str | None, str]]:
    budget = float(config.get("maxCostPerHour", DEFAULT_MAX_COST_PER_HOUR))
    costs = stack_cost(resources, config.get("pricePerHour") or {})
    total = sum(c.per_hour for c in costs)
    if total <= budget:
        return []
    parts = ", ".join(f"{c.nodes} x {c.instance_type} at ${c.price_per_node_hour:,.2f}" for c in costs)
    return [
        (
            None,
            f"GPU nodes cost about ${total:,.2f}/hour ({parts}), above the budget of ${budget:,.2f}/hour "
            "(policy config maxCostPerHour)",
        )
    ]
