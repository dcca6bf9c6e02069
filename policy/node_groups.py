"""GPU node groups and their launch templates: EFA on every network card, one AZ, IMDSv2 with a hop limit of 1.

Why these are mandatory: a p5 node without an EFA on each of its 32 network cards still boots and trains, at a
fraction of the inter-node bandwidth NCCL needs, so a mistake would show only as a slow, expensive job. EFA traffic
does not cross AZs, so a node group spread over subnets in two AZs splits the job. IMDSv1 lets any process that
can make an HTTP request read the node role's credentials; with IMDSv2 a pod's request crosses one more hop than the
node's own, so a hop limit of 1 keeps the session token (and the node role) from every pod on its own network. What
a pod needs in AWS comes through EKS Pod Identity instead.

Each check fails closed: where what it needs is unknown during the preview or not in the stack, it says "not checked"
and how to make it checkable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policy.props import StackResource, as_int, get, has_unknown, is_unknown, not_checked
from sizing.catalog import CATALOG, InstanceType

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
SUBNET = "aws:ec2/subnet:Subnet"
# The EKS managed node group itself. pulumi-eks's ManagedNodeGroup is a remote component: the engine shows the pack
# the component with no inputs at all and this child with its instance types, sizes, subnets and launch template.
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
EFA_INTERFACE_TYPES = ("efa", "efa-only")


def instance_types(node_group: Mapping[str, Any], template: Mapping[str, Any] | None = None) -> list[str]:
    """The group's instance types: its instanceTypes, or, where it names none, its launch template's instanceType. A
    capacity block's group names its type in the template only: EKS refuses it in both places (EKS user guide,
    "Create a managed node group with Capacity Blocks for ML"). Empty where unknown during preview."""
    types = get(node_group, "instanceTypes")
    if types is None:
        types = [get(template, "instanceType")]
    if not isinstance(types, Sequence) or isinstance(types, str):
        return []
    return [t for t in types if isinstance(t, str)]


def instance_type_unknown(node_group: Mapping[str, Any], template: Mapping[str, Any] | None = None) -> bool:
    """Whether the group's instance type cannot be read: its instanceTypes unknown, or, where it names none, its
    launch template unknown, not in the stack, or with an unknown instanceType. A group with neither instance types
    nor a launch template is EKS' default t3.medium (EKS API CreateNodegroup, instanceTypes), which is known."""
    types = get(node_group, "instanceTypes")
    if types is not None:
        return has_unknown(types)
    if template is None:
        return get(node_group, "launchTemplate") is not None
    return has_unknown(get(template, "instanceType"))


def _instance_type_not_checked(what: str) -> str:
    return not_checked(
        f"the node group's instance type is unknown during this preview, so {what} cannot be checked",
        "name the type with a value known before anything is created (instanceTypes, or the instanceType of a "
        "launch template this stack creates)",
    )


def node_group_instance(
    node_group: Mapping[str, Any], template: Mapping[str, Any] | None = None
) -> InstanceType | None:
    """The catalog entry of the group's instance type; None for types outside the catalog (the CPU system nodes)."""
    known = [CATALOG[t] for t in instance_types(node_group, template) if t in CATALOG]
    return known[0] if known else None


# The metadata options the two IMDS policies require of every launch template.
REQUIRED_HTTP_TOKENS = "required"
REQUIRED_HOP_LIMIT = 1


def _imds_not_visible(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """A node group without a launch template runs on a template EKS makes with default values (EKS user guide,
    "Customize managed nodes with launch templates"), whose metadata options the pack cannot see."""
    if resource_type == NODE_GROUP and get(props, "launchTemplate") is None:
        return [
            not_checked(
                "the node group has no launch template, so its nodes get the metadata options of a template EKS "
                "makes, which the pack cannot see",
                "launch it from a template of this stack that sets metadataOptions",
            )
        ]
    return []


def imdsv2_violations(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """Every launch template asks for session tokens (IMDSv2) on the instance metadata service."""
    if resource_type != LAUNCH_TEMPLATE:
        return _imds_not_visible(resource_type, props)
    tokens = get(props, "metadataOptions", "httpTokens")
    if tokens == REQUIRED_HTTP_TOKENS:
        return []
    if is_unknown(tokens):
        return [
            not_checked(
                "metadataOptions.httpTokens is unknown during this preview",
                f"set it to the literal {REQUIRED_HTTP_TOKENS!r}",
            )
        ]
    return [
        f"metadataOptions.httpTokens is {tokens!r}; set it to {REQUIRED_HTTP_TOKENS!r} so the metadata service "
        "answers only IMDSv2 session requests (EC2 defaults to 'optional', which also serves IMDSv1)"
    ]


def imds_hop_limit_violations(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """Every launch template sets the IMDSv2 token's hop limit to 1, so no pod on its own network gets a token.

    Unset is not a pass: the instance then takes the AMI's or the account's regional default (EC2
    ModifyInstanceMetadataDefaults; EC2 user guide, "Order of precedence for instance metadata options"), which the
    pack cannot see; the template pulumi-eks makes for enableIMDSv2 sets 2 (pulumi/pulumi-eks
    nodejs/eks/nodes/nodegroup.ts, createMNGCustomLaunchTemplate). Pods on the host's network are one hop away like
    the node's own processes: the limit does not cover them."""
    if resource_type != LAUNCH_TEMPLATE:
        return _imds_not_visible(resource_type, props)
    limit = get(props, "metadataOptions", "httpPutResponseHopLimit")
    if as_int(limit) == REQUIRED_HOP_LIMIT:
        return []
    if is_unknown(limit) or limit is None:
        state = "unknown during this preview" if is_unknown(limit) else "not set"
        return [
            not_checked(
                f"metadataOptions.httpPutResponseHopLimit is {state}, so the nodes' limit is one the pack cannot see "
                "(the AMI's or the account's default)",
                f"set it to the literal {REQUIRED_HOP_LIMIT}",
            )
        ]
    return [
        f"metadataOptions.httpPutResponseHopLimit is {limit!r}; set it to {REQUIRED_HOP_LIMIT}: at 2 or more a pod "
        "gets an IMDSv2 token and reads the node role's credentials (pods get AWS access through Pod Identity)"
    ]


def single_az_violations(group: StackResource, by_urn: Mapping[str, StackResource]) -> list[str]:
    """A node group of an EFA instance type lists exactly one subnet, so all its nodes share one AZ.

    On a first preview the subnet ids are unknown (the subnets do not exist yet), so the check reads the subnets
    the list is built from (the property dependencies of subnetIds) and their configured availability zones.
    Where neither is visible it says so, rather than passing a check it did not make."""
    template = launch_template_of(group, by_urn)
    template_props = template.props if template else None
    instance = node_group_instance(group.props, template_props)
    if instance is None and instance_type_unknown(group.props, template_props):
        return [_instance_type_not_checked("whether it must sit in one AZ")]
    if instance is None or not instance.supports_efa:
        return []
    subnets = get(group.props, "subnetIds")
    if not is_unknown(subnets):
        count = len(subnets) if isinstance(subnets, Sequence) and not isinstance(subnets, str) else 0
        return [] if count == 1 else [_one_az_message(instance, f"{count} subnets")]
    sources = [by_urn[u] for u in group.property_dependencies.get("subnetIds", ()) if u in by_urn]
    created = [s for s in sources if s.type == SUBNET]
    if created and len(created) == len(sources):
        if len(created) == 1:
            return []
        zones = sorted({str(get(s.props, "availabilityZone")) for s in created})
        return [_one_az_message(instance, f"{len(created)} subnets (availability zones {', '.join(zones)})")]
    return [
        f"not checked: the {instance.name} node group's subnet ids are unknown during this preview and do not come "
        "from subnets this stack creates; give it exactly one subnet, named by id, so the policy can see it"
    ]


def _one_az_message(instance: InstanceType, what: str) -> str:
    return (
        f"{instance.name} node group has {what}; give it exactly one (in the AZ of its capacity): EFA traffic "
        "does not cross availability zones"
    )


def single_az_stack_violations(resources: Sequence[StackResource]) -> list[tuple[str, str]]:
    """(urn, message) for every EFA node group that is not in exactly one subnet."""
    by_urn = {r.urn: r for r in resources}
    return [(g.urn, m) for g in resources if g.type == NODE_GROUP for m in single_az_violations(g, by_urn)]


def efa_layout_violations(instance: InstanceType, template: Mapping[str, Any]) -> list[str]:
    """The template gives every network card 0..n-1 exactly one EFA (n from the catalog), with the primary
    interface (card 0, device 0) an `efa` that also carries IP traffic, and `efa-only` only where the type has it."""
    interfaces = get(template, "networkInterfaces")
    if is_unknown(interfaces):
        return [
            not_checked(
                f"the network interfaces of the {instance.name} launch template are unknown during this preview",
                "declare them as a list whose interfaceType and networkCardIndex are known before anything is created",
            )
        ]
    if not isinstance(interfaces, Sequence) or isinstance(interfaces, str) or not interfaces:
        return [
            f"launch template for {instance.name} declares no network interfaces, so each node gets one ENA and no "
            f"EFA; declare one EFA interface on each of its {instance.efa_interfaces} network cards"
        ]
    unread = [
        index
        for index, interface in enumerate(interfaces)
        if any(is_unknown(get(interface, key)) for key in ("interfaceType", "networkCardIndex", "deviceIndex"))
    ]
    if unread:
        return [
            not_checked(
                f"interfaceType, networkCardIndex or deviceIndex of network interface(s) {_ranges(unread)} of the "
                f"{instance.name} launch template is unknown during this preview",
                "give them literal values",
            )
        ]
    problems: list[str] = []
    per_card: dict[int, int] = {}
    for interface in interfaces:
        kind, card = get(interface, "interfaceType"), _position(interface)[0]
        if kind not in EFA_INTERFACE_TYPES:
            continue
        per_card[card] = per_card.get(card, 0) + 1
        if kind == "efa-only" and not instance.efa_only_supported:
            problems.append(f"network card {card}: {instance.name} does not support 'efa-only' interfaces; use 'efa'")
    expected = set(range(instance.efa_interfaces))
    missing = sorted(expected - set(per_card))
    if missing:
        problems.append(
            f"{instance.name} has {instance.efa_interfaces} network cards (catalog) but the launch template puts no "
            f"EFA interface on card(s) {_ranges(missing)}"
        )
    doubled = sorted(card for card, n in per_card.items() if n > 1)
    if doubled:
        problems.append(f"network card(s) {_ranges(doubled)} carry more than one EFA interface; one per card")
    beyond = sorted(set(per_card) - expected)
    if beyond:
        problems.append(f"network card(s) {_ranges(beyond)} do not exist on {instance.name}")
    primary = next((i for i in interfaces if _position(i) == (0, 0)), None)
    if get(primary, "interfaceType") == "efa-only":
        problems.append("the primary interface (card 0, device 0) must be 'efa': an 'efa-only' one has no IP address")
    return problems


def efa_node_group_violations(node_group: Mapping[str, Any], template: Mapping[str, Any] | None) -> list[str]:
    """A node group of an EFA instance type launches from a template with one EFA per network card."""
    instance = node_group_instance(node_group, template)
    if instance is None and instance_type_unknown(node_group, template):
        return [_instance_type_not_checked("whether it needs EFA on every network card")]
    if instance is None or not instance.supports_efa:
        return []
    if template is None:
        if get(node_group, "launchTemplate") is None:
            return [
                f"{instance.name} node group has no launch template, so its nodes get EKS' default single ENA and "
                f"no EFA; launch it from a template with one EFA on each of its {instance.efa_interfaces} cards"
            ]
        return [
            not_checked(
                f"the {instance.name} node group's launch template is not one this stack creates, so its network "
                "interfaces cannot be read",
                "launch it from a launch template of this stack",
            )
        ]
    return efa_layout_violations(instance, template)


def launch_template_of(node_group: StackResource, by_urn: Mapping[str, StackResource]) -> StackResource | None:
    """The launch template a node group references: through the dependencies of its launchTemplate input where the
    engine gives them, otherwise any launch template among its dependencies."""
    candidates = [*node_group.property_dependencies.get("launchTemplate", ()), *node_group.dependencies]
    for urn in candidates:
        resource = by_urn.get(urn)
        if resource is not None and resource.type == LAUNCH_TEMPLATE:
            return resource
    return None


def efa_stack_violations(resources: Sequence[StackResource]) -> list[tuple[str, str]]:
    """(urn, message) for every node group of an EFA type whose launch template misses EFA on some card."""
    by_urn = {r.urn: r for r in resources}
    found: list[tuple[str, str]] = []
    for group in resources:
        if group.type != NODE_GROUP:
            continue
        template = launch_template_of(group, by_urn)
        for message in efa_node_group_violations(group.props, template.props if template else None):
            found.append((group.urn, message))
    return found


def _position(interface: Any) -> tuple[int, int]:
    """(network card, device index) of an interface; EC2 takes a missing index as 0."""
    return as_int(get(interface, "networkCardIndex")) or 0, as_int(get(interface, "deviceIndex")) or 0


def _ranges(numbers: list[int]) -> str:
    """[1, 2, 3, 7] -> '1-3, 7': 31 missing cards read better as one range."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
