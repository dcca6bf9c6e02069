"""The Grafana dashboards the stack provisions, as ConfigMaps that Grafana's dashboard sidecar loads.

kube-prometheus-stack's Grafana runs a sidecar that watches ConfigMaps labelled `grafana_dashboard: "1"` in every
namespace and loads each JSON file in them; no Grafana API call or restart is needed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from stack.names import PART_OF, PLATFORM_NAMESPACE
from workloads.platform.dashboards.gpu import DCGM_METRICS, gpu_health_dashboard
from workloads.platform.dashboards.training import training_dashboard

__all__ = ["DASHBOARDS", "DCGM_METRICS", "dashboard_configmaps", "dashboard_queries", "metric_names"]

DASHBOARD_LABEL = "grafana_dashboard"
DASHBOARD_LABEL_VALUE = "1"
DASHBOARDS: dict[str, Callable[[], dict[str, Any]]] = {
    "gpu-health": gpu_health_dashboard,
    "training": training_dashboard,
}


def dashboard_configmaps(namespace: str = PLATFORM_NAMESPACE) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"fsdp-eks-dashboard-{name}",
                "namespace": namespace,
                "labels": {DASHBOARD_LABEL: DASHBOARD_LABEL_VALUE, **PART_OF},
            },
            "data": {f"{name}.json": json.dumps(build(), indent=1, sort_keys=True)},
        }
        for name, build in DASHBOARDS.items()
    ]


def dashboard_queries(board: dict[str, Any]) -> list[str]:
    """Every PromQL expression the dashboard runs: panel targets and variable queries."""
    exprs = [target["expr"] for panel in board["panels"] for target in panel.get("targets", [])]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            exprs.append(variable["definition"])
    return exprs


# PromQL words that are not metric names: keywords, operators spelled as words, and aggregation modifiers.
_KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
    "atan2",
    "inf",
    "nan",
}
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_IDENTIFIER = re.compile(r"(?<![\w.:$])([a-zA-Z_:][\w:]*)(\s*\()?")


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects: identifiers that are neither functions, keywords nor labels.
    `label_values(metric, label)` (a Grafana variable query) counts its metric."""
    label_values = re.fullmatch(r"\s*label_values\(\s*([a-zA-Z_:][\w:]*)\s*,.*\)\s*", expr)
    if label_values:
        return {label_values.group(1)}
    text = _RANGES.sub("", _MATCHERS.sub("", _GROUPING.sub("", _STRINGS.sub('""', expr))))
    return {
        match.group(1)
        for match in _IDENTIFIER.finditer(text)
        if match.group(2) is None and match.group(1).lower() not in _KEYWORDS
    }
