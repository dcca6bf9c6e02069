"""The Grafana dashboards: valid for Grafana's dashboard model, querying only metrics that exist (the DCGM
exporter's six and the trainer's own, read from trainer/base/metrics/figures.py), in PromQL that Prometheus parses."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

from stack.config import MonitoringConfig
from tests.workloads.platform.grafana_dashboard_schema import GRAFANA_DASHBOARD_SCHEMA
from trainer.base.metrics.figures import METRIC_FIELDS
from workloads.platform.dashboards import (
    DASHBOARDS,
    DCGM_METRICS,
    dashboard_configmaps,
    dashboard_queries,
    metric_names,
)
from workloads.platform.monitoring import kube_prometheus_stack_values

from .prometheus_tools import require

EXPORTED = set(DCGM_METRICS) | {name for name, _ in METRIC_FIELDS.values()}
BOARDS = {name: build() for name, build in DASHBOARDS.items()}


@pytest.mark.parametrize("name", BOARDS)
def test_dashboard_is_valid_for_grafanas_dashboard_model(name: str) -> None:
    jsonschema.Draft202012Validator.check_schema(GRAFANA_DASHBOARD_SCHEMA)
    jsonschema.validate(BOARDS[name], GRAFANA_DASHBOARD_SCHEMA, cls=jsonschema.Draft202012Validator)


@pytest.mark.parametrize("name", BOARDS)
def test_panel_ids_are_unique_and_panels_do_not_overlap(name: str) -> None:
    panels = BOARDS[name]["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24
        mine = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"]) for y in range(pos["y"], pos["y"] + pos["h"])}
        assert not mine & cells, f"{panel['title']} overlaps another panel"
        cells |= mine


@pytest.mark.parametrize("name", BOARDS)
def test_every_queried_metric_is_exported_by_dcgm_or_the_trainer(name: str) -> None:
    for expr in dashboard_queries(BOARDS[name]):
        names = metric_names(expr)
        assert names, f"no metric found in {expr!r}"
        assert names <= EXPORTED, f"{expr!r} queries {sorted(names - EXPORTED)}, which nothing exports"


def test_the_gpu_dashboard_shows_all_six_dcgm_metrics_per_node_and_gpu() -> None:
    board = BOARDS["gpu-health"]
    per_gpu = [t for p in board["panels"] if p["type"] == "timeseries" for t in p["targets"]]
    shown = {name for t in per_gpu for name in metric_names(t["expr"])}
    assert shown == set(DCGM_METRICS)
    assert all("{{Hostname}}" in t["legendFormat"] and "{{gpu}}" in t["legendFormat"] for t in per_gpu)


def test_the_training_dashboard_shows_loss_throughput_mfu_step_time_memory_and_restarts() -> None:
    from workloads.platform.dashboards.training import metric

    shown = {name for expr in dashboard_queries(BOARDS["training"]) for name in metric_names(expr)}
    wanted = {metric(k) for k in ("loss", "tokens_per_second", "mfu", "step_time_s", "peak_memory_bytes", "restarts")}
    assert wanted <= shown


def test_metric_names_skips_functions_labels_keywords_and_variables() -> None:
    expr = 'count(max by (Hostname, gpu) (DCGM_FI_DEV_XID_ERRORS{Hostname=~"$node"}[5m]) > 0) or vector(0)'
    assert metric_names(expr) == {"DCGM_FI_DEV_XID_ERRORS"}
    assert metric_names("label_values(DCGM_FI_DEV_GPU_UTIL, Hostname)") == {"DCGM_FI_DEV_GPU_UTIL"}


def test_every_query_parses_as_promql(tmp_path: Path) -> None:
    promtool = require("promtool")
    # promtool parses each rule's expression offline; Grafana's variables become what "All" selects.
    rules = [
        {"record": f"fsdp_eks:{name.replace('-', '_')}:{index}", "expr": expr.replace("$node", ".*")}
        for name, board in BOARDS.items()
        for index, expr in enumerate(dashboard_queries(board))
        if not expr.startswith("label_values(")
    ]
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    result = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dashboards_ship_as_configmaps_with_the_label_grafanas_sidecar_watches() -> None:
    sidecar = kube_prometheus_stack_values(MonitoringConfig())["grafana"]["sidecar"]["dashboards"]
    for configmap in dashboard_configmaps():
        assert configmap["metadata"]["labels"][sidecar["label"]] == sidecar["labelValue"]
        ((file_name, text),) = configmap["data"].items()
        assert re.fullmatch(r"[a-z-]+\.json", file_name)
        assert json.loads(text)["uid"].startswith("fsdp-eks-")


def test_a_missing_prometheus_tool_fails_with_how_to_install_it() -> None:
    with pytest.raises(pytest.fail.Exception, match="apt-get install prometheus"):
        require("promtool-that-is-not-installed")


def test_the_training_dashboard_shows_validation_beside_the_training_loss() -> None:
    """job.validation: the Loss panel holds both losses, with the held-out perplexity and the best evaluation
    (loss and step) beside it."""
    from workloads.platform.dashboards.training import metric

    panels = {panel["title"]: panel for panel in BOARDS["training"]["panels"]}
    loss = [target["expr"] for target in panels["Loss"]["targets"]]
    assert loss == [metric("loss"), metric("val_loss")]
    assert [t["legendFormat"].split()[0] for t in panels["Loss"]["targets"]] == ["training", "validation"]
    assert [t["expr"] for t in panels["Validation perplexity"]["targets"]] == [metric("val_perplexity")]
    best = {title: panels[title] for title in ("Best validation loss", "Best validation step")}
    assert [p["targets"][0]["expr"] for p in best.values()] == [metric("best_val_loss"), metric("best_val_step")]
    assert all(p["type"] == "stat" for p in best.values())


def test_the_gpu_dashboard_shows_the_fabric_preflight_beside_what_it_expected() -> None:
    """Issue 27: each level's bus bandwidth from the trainer's preflight, the expected figures as the reference, and
    the slowest node's share, all from trainer/base/metrics/figures.py's preflight keys."""
    from trainer.base.metrics.figures import PREFLIGHT_FIELDS
    from workloads.platform.dashboards.training import metric

    shown = {name for expr in dashboard_queries(BOARDS["gpu-health"]) for name in metric_names(expr)}
    assert {metric(key) for key in PREFLIGHT_FIELDS} <= shown
    panels = {panel["title"]: panel for panel in BOARDS["gpu-health"]["panels"]}
    bandwidth = panels["Fabric: preflight bus bandwidth"]
    assert bandwidth["fieldConfig"]["defaults"]["unit"] == "GBs"  # Grafana's gigabytes per second; the keys' GB/s
    assert {t["legendFormat"].split()[0] for t in bandwidth["targets"]} >= {"expected", "all-gather", "all-reduce"}
