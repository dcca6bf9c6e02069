"""`pulumi destroy` of a stack on an existing cluster takes the launcher's bad-node taint off its nodes
(infra/bad_node_cleanup.py): the hook's calls against a stand-in Kubernetes API on this machine, and its binding on the
ExistingCluster component, which the engine deletes after the job and the platform."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from infra.bad_node_cleanup import HOOK_NAME, clean_cluster, cluster_api, without_bad_node_taint
from tests.harness.http_stand_in import serving
from tests.infra.existing_cluster_stack import run_existing_cluster
from trainer.base.pod.bad_node import ApiServer
from trainer.launch.node_taint import bad_node_taint

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
TOKEN = "k8s-aws-v1.stand-in"


def _node(name: str, *taints: dict[str, Any], version: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": str(version)}, "spec": {"taints": list(taints)}}


class StandInApi(BaseHTTPRequestHandler):
    """GET /api/v1/nodes[/NAME] and merge-PATCH /api/v1/nodes/NAME with the resourceVersion precondition, as the API
    server answers them; the first PATCH of `conflict_once` is answered 409, as if the node had changed."""

    nodes: dict[str, dict[str, Any]]
    conflict_once: set[str]

    def _send(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        assert self.headers["Authorization"] == f"Bearer {TOKEN}"
        if self.path == "/api/v1/nodes":
            self._send(200, {"kind": "NodeList", "items": list(self.nodes.values())})
        else:
            self._send(200, self.nodes[self.path.rsplit("/", 1)[-1]])

    def do_PATCH(self) -> None:
        assert self.headers["Content-Type"] == "application/merge-patch+json"
        name = self.path.rsplit("/", 1)[-1]
        patch = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        node = self.nodes[name]
        if name in self.conflict_once:
            self.conflict_once.discard(name)
            node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
        if patch["metadata"]["resourceVersion"] != node["metadata"]["resourceVersion"]:
            self._send(409, {"kind": "Status", "reason": "Conflict"})
            return
        node["spec"]["taints"] = patch["spec"]["taints"]
        node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
        self._send(200, node)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def api() -> Iterator[tuple[ApiServer, dict[str, dict[str, Any]]]]:
    nodes = {
        "gpu-a": _node("gpu-a", GPU_TAINT, bad_node_taint("preflight")),
        "gpu-b": _node("gpu-b", GPU_TAINT, bad_node_taint("nvlink")),
        "gpu-c": _node("gpu-c", GPU_TAINT),
    }
    handler = type("Handler", (StandInApi,), {"nodes": nodes, "conflict_once": {"gpu-b"}})
    with serving(handler) as url:
        yield ApiServer(url, TOKEN), nodes


def test_every_tainted_node_is_cleaned_and_the_other_taints_stay(api: tuple[ApiServer, dict]) -> None:
    server, nodes = api
    assert clean_cluster(server) == ["gpu-a", "gpu-b"]  # gpu-b after a 409, read again
    assert all(node["spec"]["taints"] == [GPU_TAINT] for node in nodes.values())
    assert clean_cluster(server) == []


def test_a_node_without_the_taint_gets_no_patch() -> None:
    assert without_bad_node_taint(_node("gpu-c", GPU_TAINT)) is None
    assert without_bad_node_taint(_node("gpu-a", bad_node_taint("x"), version=7)) == {
        "metadata": {"resourceVersion": "7"},
        "spec": {"taints": []},
    }


def test_the_api_is_reached_as_the_provider_reaches_it(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def aws(args: list[str]) -> dict[str, Any]:
        calls.append(args)
        if args[2] == "describe-cluster":
            ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----").decode()
            return {
                "cluster": {
                    "endpoint": "https://abc.gr7.us-east-1.eks.amazonaws.com",
                    "certificateAuthority": {"data": ca},
                }
            }
        return {"kind": "ExecCredential", "status": {"token": TOKEN}}

    server = cluster_api("fsdp-eks-x", "us-east-1", tmp_path, aws)
    assert (server.url, server.token) == ("https://abc.gr7.us-east-1.eks.amazonaws.com", TOKEN)
    assert server.ca_file is not None and server.ca_file.read_bytes() == b"-----BEGIN CERTIFICATE-----"
    assert calls[1][:3] == ["aws", "eks", "get-token"] and "--region" in calls[1]


@pytest.mark.program
def test_the_existing_cluster_component_carries_the_hook_the_engine_runs_at_its_delete() -> None:
    run = run_existing_cluster()
    assert run.error is None, run.error
    (component,) = run.of_type("fsdp-eks:infra:ExistingCluster")
    assert component.hooks["beforeDelete"] == [HOOK_NAME]
    assert not any(r.hooks.get("beforeDelete") for r in run.resources if r is not component)
