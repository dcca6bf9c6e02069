"""`pulumi destroy` deletes what uses a thing before the thing: the engine's rule applied to what each stack
registers (tests/harness/destroy_order.py)."""

from __future__ import annotations

from tests.harness.destroy_order import deletion_rounds, dependency_graph, depends_on
from tests.harness.pulumi_program import Registered


def _resource(
    name: str,
    *,
    parent: str = "",
    deps: tuple[str, ...] = (),
    custom: bool = True,
    provider: str = "",
    property_deps: dict | None = None,
) -> Registered:
    return Registered(
        "t:m:T", name, name, parent, provider, list(deps), False, [], {}, name, {}, custom, property_deps or {}
    )


def test_a_dependency_on_a_remote_component_reaches_the_children_it_registered_first() -> None:
    component = _resource("component", custom=False)
    child = _resource("child", parent="component")
    user = _resource("user", deps=("component",))
    late_child = _resource("late-child", parent="component")
    graph = dependency_graph([component, child, user, late_child])
    assert depends_on(graph, "user", "child")
    assert not depends_on(graph, "user", "late-child")


def test_parents_providers_and_property_dependencies_order_deletion() -> None:
    resources = [
        _resource("cluster"),
        _resource("provider", deps=("cluster",)),
        _resource("object", provider="provider::0123"),
        _resource("volume", property_deps={"spec": ["object"]}),
        _resource("child", parent="volume"),
    ]
    graph = dependency_graph(resources)
    assert depends_on(graph, "child", "cluster")
    rounds = deletion_rounds(graph)
    assert rounds[0] == ["child"] and rounds[-1] == ["cluster"]


def test_resources_without_a_path_between_them_are_deleted_in_the_same_round() -> None:
    graph = dependency_graph([_resource("driver"), _resource("job"), _resource("cluster")])
    assert deletion_rounds(graph) == [["cluster", "driver", "job"]]
    assert not depends_on(graph, "job", "driver")
