"""Small builders for the parts of a Grafana dashboard the project uses: panels, targets, variables, layout.

Everything returns plain dicts in Grafana's dashboard JSON model (schemaVersion 39, Grafana 11 and later);
the tests hold the dashboards to a schema of the fields Grafana requires
(tests/workloads/platform/grafana_dashboard_schema.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 39
GRID_COLUMNS = 24  # Grafana's grid is 24 columns wide
# Panels query the data source chosen in the dashboard's `datasource` variable, which defaults to the Prometheus
# data source that kube-prometheus-stack provisions; the same JSON then works against any Prometheus.
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""
    instant: bool = False


@dataclass(frozen=True)
class Panel:
    title: str
    queries: tuple[Query, ...]
    unit: str = "short"
    kind: str = "timeseries"  # timeseries | stat | table
    description: str = ""
    width: int = 12
    height: int = 8
    options: dict[str, Any] = field(default_factory=dict)


def datasource_variable() -> dict[str, Any]:
    return {
        "name": "datasource",
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        "current": {"text": "Prometheus", "value": "prometheus"},
        "hide": 0,
    }


def label_variable(name: str, metric: str, label: str) -> dict[str, Any]:
    """A multi-select variable over a label's values; "All" matches every series, with or without the label."""
    return {
        "name": name,
        "label": name,
        "type": "query",
        "datasource": DATASOURCE,
        # The plain-string form of a Prometheus variable query: every Grafana version since 7 reads it.
        "query": f"label_values({metric}, {label})",
        "definition": f"label_values({metric}, {label})",
        "refresh": 2,  # on time range change, so new nodes appear without a reload
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "current": {"text": "All", "value": "$__all"},
        "sort": 1,
        "hide": 0,
    }


def _target(query: Query, ref_id: str) -> dict[str, Any]:
    return {
        "refId": ref_id,
        "datasource": DATASOURCE,
        "expr": query.expr,
        "legendFormat": query.legend or "__auto",
        "instant": query.instant,
        "range": not query.instant,
    }


def _panel_json(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    options: dict[str, Any] = {
        "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
        "tooltip": {"mode": "multi", "sort": "desc"},
    }
    if panel.kind == "stat":
        options = {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "value",
            "graphMode": "area",
            "textMode": "auto",
        }
    elif panel.kind == "table":
        options = {"showHeader": True}
    return {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": {"x": x, "y": y, "w": panel.width, "h": panel.height},
        "targets": [_target(q, chr(ord("A") + i)) for i, q in enumerate(panel.queries)],
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "options": options | panel.options,
    }


def layout(panels: list[Panel]) -> list[dict[str, Any]]:
    """Left to right, wrapping at the grid's width; ids in reading order."""
    placed, x, y, row_height = [], 0, 0, 0
    for panel_id, panel in enumerate(panels, start=1):
        if x + panel.width > GRID_COLUMNS:
            x, y, row_height = 0, y + row_height, 0
        placed.append(_panel_json(panel, panel_id, x, y))
        x, row_height = x + panel.width, max(row_height, panel.height)
    return placed


def dashboard(
    uid: str,
    title: str,
    description: str,
    panels: list[Panel],
    variables: list[dict[str, Any]] | None = None,
    refresh: str = "30s",
) -> dict[str, Any]:
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["fsdp-eks"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,  # shared crosshair: line up a loss spike with the GPU panels
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "refresh": refresh,
        "time": {"from": "now-3h", "to": "now"},
        "templating": {"list": [datasource_variable(), *(variables or [])]},
        "annotations": {"list": []},
        "links": [],
        "panels": layout(panels),
    }
