"""The platform's pods go where the cluster has room for them: the stack's own system nodes, by their label, or on
an existing cluster any node they tolerate, since docs/aws.md asks an existing cluster for no system label."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from stack.files import load_stack_config
from stack.names import NODE_GROUP_LABEL, SYSTEM_NODE_GROUP
from stack.paths import PROJECT_ROOT
from workloads.platform.charts import ChartRelease, dcgm_exporter_chart, device_plugin_charts, monitoring_chart
from workloads.platform.objects import platform_objects

EXISTING_CLUSTER_DOC = (PROJECT_ROOT / "docs" / "aws.md").read_text().split("## An existing cluster", 1)[1]


def _selectors(value: Any) -> Iterator[dict[str, str]]:
    """Every nodeSelector in a manifest or a chart's values, however deep."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "nodeSelector" and isinstance(inner, dict):
                yield inner
            yield from _selectors(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _selectors(inner)


def _charts(config) -> list[ChartRelease]:
    """The charts workloads/platform/component.py installs that place pods of their own."""
    charts = device_plugin_charts(config)
    if config.monitoring.enabled:
        charts += [monitoring_chart(config), dcgm_exporter_chart(config)]
    return charts


def _everything(config) -> list[Any]:
    return [*platform_objects(config), *(chart.values for chart in _charts(config))]


def _existing_cluster():
    config = load_stack_config("p5-2")
    cluster = dataclasses.replace(config.cluster, existing=True)
    return dataclasses.replace(config, cluster=cluster, storage=dataclasses.replace(config.storage, fsx=False))


def test_the_stacks_own_cluster_puts_etcd_and_monitoring_on_its_system_nodes() -> None:
    selectors = [s for value in _everything(load_stack_config("p5-2")) for s in _selectors(value)]
    system = {NODE_GROUP_LABEL: SYSTEM_NODE_GROUP}
    assert selectors.count(system) == 5  # etcd, Prometheus, its operator, kube-state-metrics, Grafana


def test_on_an_existing_cluster_no_platform_pod_selects_a_label_the_docs_do_not_ask_for() -> None:
    config = _existing_cluster()
    selected = {(k, v) for value in _everything(config) for s in _selectors(value) for k, v in s.items()}
    assert selected
    for key, value in selected:
        assert f"`{key}={value}`" in EXISTING_CLUSTER_DOC, (key, value)
    assert (NODE_GROUP_LABEL, SYSTEM_NODE_GROUP) not in selected
