"""A JSON Schema (draft 2020-12) of the parts of Grafana's dashboard model that provisioning relies on.

Written for this project from Grafana's dashboard JSON model documentation (grafana.com, "JSON model"): no
installed package ships Grafana's own schema (Grafana keeps it as CUE inside its source tree), so this states the
required fields and their types, and is strict (no unknown keys) wherever the project writes the object itself.
What it checks that Grafana would otherwise reject or silently drop: a uid Grafana accepts (at most 40 characters
of [a-zA-Z0-9-_]), an integer schemaVersion, panels of a known type on the 24-column grid, each target with a
refId and a PromQL expression, and templating variables with a name and a type.
"""

from __future__ import annotations

from typing import Any

_DATASOURCE = {
    "type": "object",
    "required": ["type", "uid"],
    "properties": {"type": {"const": "prometheus"}, "uid": {"type": "string", "minLength": 1}},
    "additionalProperties": False,
}

_TARGET = {
    "type": "object",
    "required": ["refId", "expr", "datasource"],
    "properties": {
        "refId": {"type": "string", "pattern": "^[A-Z]$"},
        "expr": {"type": "string", "minLength": 1},
        "datasource": _DATASOURCE,
        "legendFormat": {"type": "string"},
        "instant": {"type": "boolean"},
        "range": {"type": "boolean"},
    },
    "additionalProperties": False,
}

_GRID_POS = {
    "type": "object",
    "required": ["x", "y", "w", "h"],
    "properties": {
        "x": {"type": "integer", "minimum": 0, "maximum": 23},
        "y": {"type": "integer", "minimum": 0},
        "w": {"type": "integer", "minimum": 1, "maximum": 24},
        "h": {"type": "integer", "minimum": 1},
    },
    "additionalProperties": False,
}

_PANEL = {
    "type": "object",
    "required": ["id", "type", "title", "gridPos", "datasource", "targets", "fieldConfig", "options"],
    "properties": {
        "id": {"type": "integer", "minimum": 1},
        # Core panel plugins that ship with Grafana (no plugin install needed).
        "type": {"enum": ["timeseries", "stat", "table", "gauge", "bargauge", "text", "row"]},
        "title": {"type": "string", "minLength": 1},
        "description": {"type": "string"},
        "gridPos": _GRID_POS,
        "datasource": _DATASOURCE,
        "targets": {"type": "array", "minItems": 1, "items": _TARGET},
        "fieldConfig": {
            "type": "object",
            "required": ["defaults", "overrides"],
            "properties": {
                "defaults": {"type": "object", "properties": {"unit": {"type": "string", "minLength": 1}}},
                "overrides": {"type": "array"},
            },
            "additionalProperties": False,
        },
        "options": {"type": "object"},
    },
    "additionalProperties": False,
}

_VARIABLE = {
    "type": "object",
    "required": ["name", "type"],
    "properties": {
        "name": {"type": "string", "pattern": "^[a-zA-Z_][a-zA-Z0-9_]*$"},
        "type": {"enum": ["query", "datasource", "custom", "constant", "interval", "textbox"]},
        "label": {"type": "string"},
        "query": {},
        "datasource": _DATASOURCE,
        "definition": {"type": "string"},
        "refresh": {"enum": [0, 1, 2]},
        "includeAll": {"type": "boolean"},
        "multi": {"type": "boolean"},
        "allValue": {"type": "string"},
        "current": {"type": "object", "required": ["text", "value"]},
        "sort": {"type": "integer", "minimum": 0, "maximum": 8},
        "hide": {"enum": [0, 1, 2]},
    },
    "additionalProperties": False,
}

GRAFANA_DASHBOARD_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Grafana dashboard (the fields fsdp-eks writes)",
    "type": "object",
    "required": ["uid", "title", "schemaVersion", "panels", "templating", "time"],
    "properties": {
        "uid": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,40}$"},
        "title": {"type": "string", "minLength": 1},
        "description": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "timezone": {"enum": ["browser", "utc", ""]},
        "editable": {"type": "boolean"},
        "graphTooltip": {"enum": [0, 1, 2]},
        "schemaVersion": {"type": "integer", "minimum": 36},
        "version": {"type": "integer", "minimum": 0},
        "refresh": {"type": "string", "pattern": "^([0-9]+[smhd])?$"},
        "time": {
            "type": "object",
            "required": ["from", "to"],
            "properties": {"from": {"type": "string"}, "to": {"type": "string"}},
            "additionalProperties": False,
        },
        "templating": {
            "type": "object",
            "required": ["list"],
            "properties": {"list": {"type": "array", "items": _VARIABLE}},
            "additionalProperties": False,
        },
        "annotations": {"type": "object", "properties": {"list": {"type": "array"}}},
        "links": {"type": "array"},
        "panels": {"type": "array", "minItems": 1, "items": _PANEL},
    },
    "additionalProperties": False,
}
