"""The dashboards' queries against a real Prometheus (Debian's `prometheus`) scraping a real, running trainer.

Prometheus, the trainer (`python -m trainer`, tiny model on CPU, serving its metrics on 127.0.0.1) and a stand-in
DCGM exporter run on free loopback ports; every query of the training dashboard must return a value, and so must
the GPU dashboard's against series shaped as dcgm-exporter shapes them. Everything started here is stopped here.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import yaml

from stack.paths import PROJECT_ROOT
from tests.workloads.platform.prometheus_tools import require
from workloads.platform.dashboards import DASHBOARDS, dashboard_queries
from workloads.platform.dashboards.gpu import DCGM_METRICS, XID_ERRORS

pytestmark = pytest.mark.slow

SCRAPE_INTERVAL_S = 1
READY_TIMEOUT_S = 180  # the trainer imports torch and builds its model first; CI machines are shared


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def wait_for(what: str, check, timeout_s: float = READY_TIMEOUT_S, processes: tuple = ()) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for process in processes:
            assert process.poll() is None, f"{process.args[:3]} exited while waiting for {what}"
        try:
            if check():
                return
        except OSError:
            pass  # not listening yet
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)  # its own session: the process and anything it started
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=20)


DCGM_STUB = """
import sys, time
from prometheus_client import CollectorRegistry, Gauge, start_http_server
registry = CollectorRegistry()
labels = ["gpu", "UUID", "device", "modelName", "Hostname"]
gauges = {name: Gauge(name, name, labels, registry=registry) for name in sys.argv[2].split(",")}
for node in ("ip-10-0-1-11.ec2.internal", "ip-10-0-1-12.ec2.internal"):
    for gpu in range(2):
        values = dict.fromkeys(gauges, 42.0)
        values[sys.argv[3]] = 79.0 if gpu == 1 else 0.0  # one GPU with an XID, as a faulting GPU reports it
        for name, gauge in gauges.items():
            gauge.labels(str(gpu), f"GPU-{node[3:13]}-{gpu}", f"nvidia{gpu}", "NVIDIA H100 80GB HBM3", node).set(
                values[name])
start_http_server(int(sys.argv[1]), addr="127.0.0.1", registry=registry)
while True:
    time.sleep(60)
"""


@dataclass(frozen=True)
class Stack:
    prometheus_url: str


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prometheus = require("prometheus")
    work = tmp_path_factory.mktemp("prometheus")
    trainer_port, dcgm_port, prometheus_port = free_port(), free_port(), free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(PROJECT_ROOT)}
    trainer_cmd = [
        sys.executable,
        "-m",
        "trainer",
        "--model",
        "tiny",
        "--dataset",
        "synthetic",
        "--steps",
        "100000",
        "--seq-len",
        "64",
        "--batch-size",
        "2",
        "--device",
        "cpu",
        "--log-every",
        "1",
        "--peak-tflops",
        "1",
        "--metrics-port",
        str(trainer_port),
        "--metrics-host",
        "127.0.0.1",
    ]
    config = {
        "global": {"scrape_interval": f"{SCRAPE_INTERVAL_S}s", "evaluation_interval": f"{SCRAPE_INTERVAL_S}s"},
        "scrape_configs": [
            {"job_name": "trainer", "static_configs": [{"targets": [f"127.0.0.1:{trainer_port}"]}]},
            {"job_name": "dcgm-exporter", "static_configs": [{"targets": [f"127.0.0.1:{dcgm_port}"]}]},
        ],
    }
    (work / "prometheus.yml").write_text(yaml.safe_dump(config))
    prometheus_cmd = [
        prometheus,
        f"--config.file={work / 'prometheus.yml'}",
        f"--storage.tsdb.path={work / 'data'}",
        f"--web.listen-address=127.0.0.1:{prometheus_port}",
    ]
    logs = {name: open(work / f"{name}.log", "w") for name in ("trainer", "dcgm", "prometheus")}  # noqa: SIM115
    started: list[subprocess.Popen] = []
    try:
        for name, cmd in (
            ("trainer", trainer_cmd),
            ("dcgm", [sys.executable, "-c", DCGM_STUB, str(dcgm_port), ",".join(DCGM_METRICS), XID_ERRORS]),
            ("prometheus", prometheus_cmd),
        ):
            started.append(
                subprocess.Popen(
                    cmd, cwd=work, env=env, stdout=logs[name], stderr=subprocess.STDOUT, start_new_session=True
                )
            )
        url = f"http://127.0.0.1:{prometheus_port}"

        def trainer_scraped_after_a_step() -> bool:
            result = instant(url, 'trainer_step{job="trainer"} > 0')
            return bool(result) and bool(instant(url, 'up{job="dcgm-exporter"} == 1'))

        try:
            wait_for("Prometheus to scrape a trained step", trainer_scraped_after_a_step, processes=tuple(started))
        except AssertionError:
            for name, log in logs.items():
                log.flush()
                print(f"--- {name} log ---\n{(work / f'{name}.log').read_text()[-3000:]}")
            raise
        yield Stack(url)
    finally:
        for process in reversed(started):
            stop(process)
        for log in logs.values():
            log.close()


def instant(prometheus_url: str, expr: str) -> list[dict]:
    body = get_json(f"{prometheus_url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}")
    assert body["status"] == "success", body
    return body["data"]["result"]


def as_all(expr: str) -> str:
    """What Grafana sends when a multi-value variable is set to All (its allValue)."""
    return expr.replace("$node", ".*")


TRAINING_QUERIES = dashboard_queries(DASHBOARDS["training"]())
GPU_QUERIES = [q for q in dashboard_queries(DASHBOARDS["gpu-health"]()) if not q.startswith("label_values(")]


@pytest.mark.parametrize("expr", TRAINING_QUERIES)
def test_every_training_dashboard_query_returns_a_value_from_the_running_trainer(scraped: Stack, expr: str) -> None:
    result = instant(scraped.prometheus_url, expr)
    assert result, f"{expr!r} returned nothing"
    assert all(sample["value"][1] not in ("", None) for sample in result)


@pytest.mark.parametrize("expr", GPU_QUERIES)
def test_every_gpu_dashboard_query_returns_a_value_from_dcgm_shaped_series(scraped: Stack, expr: str) -> None:
    assert instant(scraped.prometheus_url, as_all(expr)), f"{expr!r} returned nothing"


def test_the_node_variable_lists_the_gpu_nodes(scraped: Stack) -> None:
    query = urllib.parse.urlencode({"match[]": "DCGM_FI_DEV_GPU_UTIL"})
    body = get_json(f"{scraped.prometheus_url}/api/v1/label/Hostname/values?{query}")
    assert body["data"] == ["ip-10-0-1-11.ec2.internal", "ip-10-0-1-12.ec2.internal"]
