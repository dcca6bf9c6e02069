"""The launcher's bad-node taint (trainer/launch/node_taint.py) against a small HTTP server that plays the Kubernetes
API server: it serves a Node, records each PATCH, applies it as a JSON merge patch with the resourceVersion
precondition, and the result is checked against Kubernetes' strict Node schema."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from stack.config import KUBERNETES_VERSIONS
from tests.harness.http_stand_in import serving
from trainer.base.pod.bad_node import (
    BAD_NODE_TAINT_EFFECT,
    BAD_NODE_TAINT_KEY,
    CONFLICT_ATTEMPTS,
    NODE_NAME_VARIABLE,
    ApiServer,
)
from trainer.launch.node_taint import in_cluster, taint_own_node, taint_value, taints_with

TOKEN = "service-account-token"
NODE = "ip-10-0-1-23.ec2.internal"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


@dataclass
class FakeApiServer:
    """One Node; `conflicts` PATCHes answered 409 first (as if the node changed in between); `status` for every call."""

    node: dict[str, Any]
    conflicts: int = 0
    status: int = 200
    patches: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (content type, body)


def handler_for(fake: FakeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _reply(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _refused(self) -> bool:
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                self._reply(401, {"kind": "Status", "message": "Unauthorized"})
                return True
            if self.path != f"/api/v1/nodes/{NODE}":
                self._reply(404, {"kind": "Status", "message": f"nodes {self.path} not found"})
                return True
            if fake.status != 200:
                self._reply(fake.status, {"kind": "Status", "message": "nodes is forbidden: cannot patch"})
                return True
            return False

        def do_GET(self) -> None:
            if not self._refused():
                self._reply(200, fake.node)

        def do_PATCH(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            fake.patches.append((self.headers["Content-Type"], body))
            if self._refused():
                return
            if fake.conflicts:
                fake.conflicts -= 1
                fake.node["metadata"]["resourceVersion"] = str(int(fake.node["metadata"]["resourceVersion"]) + 1)
            if body["metadata"]["resourceVersion"] != fake.node["metadata"]["resourceVersion"]:
                self._reply(409, {"kind": "Status", "message": "the object has been modified"})
                return
            fake.node = merge_patch(fake.node, body)
            fake.node["metadata"]["resourceVersion"] = str(int(fake.node["metadata"]["resourceVersion"]) + 1)
            self._reply(200, fake.node)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def node(taints: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE, "resourceVersion": "100", "labels": {"fsdp-eks/node-group": "gpu"}},
        "spec": {"providerID": "aws:///us-east-1a/i-0123", "taints": taints},
    }


@pytest.fixture
def api() -> Iterator[tuple[FakeApiServer, ApiServer]]:
    fake = FakeApiServer(node([dict(GPU_TAINT)]))
    with serving(handler_for(fake)) as url:
        yield fake, ApiServer(url, TOKEN)


ENV = {NODE_NAME_VARIABLE: NODE}


def test_the_launcher_adds_its_taint_and_keeps_the_gpu_taint(api: tuple[FakeApiServer, ApiServer]) -> None:
    fake, server = api
    line = taint_own_node("inter_allreduce", ENV, server)
    assert f"node {NODE} tainted {BAD_NODE_TAINT_KEY}=inter_allreduce:{BAD_NODE_TAINT_EFFECT}" in line
    ((content_type, body),) = fake.patches
    assert content_type == "application/merge-patch+json"
    assert body["metadata"] == {"resourceVersion": "100"}  # the read's version: a precondition
    bad = {"key": BAD_NODE_TAINT_KEY, "value": "inter_allreduce", "effect": BAD_NODE_TAINT_EFFECT}
    assert fake.node["spec"]["taints"] == [GPU_TAINT, bad]
    kubernetes_validate.validate(fake.node, f"{KUBERNETES_VERSIONS[-1]}.0", strict=True)


def test_a_node_changed_between_read_and_patch_is_read_again(api: tuple[FakeApiServer, ApiServer]) -> None:
    fake, server = api
    fake.conflicts = 1
    assert "tainted" in taint_own_node("preflight", ENV, server)
    assert [body["metadata"]["resourceVersion"] for _, body in fake.patches] == ["100", "101"]
    assert fake.node["spec"]["taints"][-1]["key"] == BAD_NODE_TAINT_KEY


def test_a_node_that_changes_under_every_patch_is_given_up_after_the_last_attempt(
    api: tuple[FakeApiServer, ApiServer],
) -> None:
    fake, server = api
    fake.conflicts = CONFLICT_ATTEMPTS
    line = taint_own_node("preflight", ENV, server)
    assert f"changed under every one of {CONFLICT_ATTEMPTS} patches (409 Conflict)" in line
    assert len(fake.patches) == CONFLICT_ATTEMPTS and fake.node["spec"]["taints"] == [GPU_TAINT]


def test_a_node_already_tainted_is_not_patched(api: tuple[FakeApiServer, ApiServer]) -> None:
    fake, server = api
    taint_own_node("preflight", ENV, server)
    assert "already carries" in taint_own_node("preflight", ENV, server)
    assert len(fake.patches) == 1


def test_a_refused_patch_is_a_log_line_not_an_exception(api: tuple[FakeApiServer, ApiServer]) -> None:
    fake, server = api
    fake.status = 403
    line = taint_own_node("preflight", ENV, server)
    assert line.startswith(f"node {NODE} not tainted") and "HTTP 403" in line and "forbidden" in line


def test_no_api_server_and_no_node_name_are_log_lines() -> None:
    unreachable = ApiServer("http://127.0.0.1:9", TOKEN)  # the discard port: connection refused
    assert "not tainted" in taint_own_node("preflight", ENV, unreachable)
    assert f"{NODE_NAME_VARIABLE} is not set" in taint_own_node("preflight", {}, unreachable)
    assert "no Kubernetes API server" in taint_own_node("preflight", ENV)  # this machine is no pod


def test_in_cluster_reads_the_mounted_token_and_ca(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(TOKEN + "\n")
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    env = {"KUBERNETES_SERVICE_HOST": "172.20.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert in_cluster(env, tmp_path) == ApiServer("https://172.20.0.1:443", TOKEN, tmp_path / "ca.crt")
    assert in_cluster({"KUBERNETES_SERVICE_HOST": "fd00::1"}, tmp_path).url == "https://[fd00::1]:443"  # type: ignore[union-attr]
    assert in_cluster({}, tmp_path) is None


def test_a_taint_value_is_a_label_value() -> None:
    assert taint_value("intra node all-gather") == "intra-node-all-gather"
    assert taint_value("--") == "preflight"
    assert len(taint_value("x" * 100)) == 63


def test_a_taint_of_the_same_key_and_effect_is_replaced_not_doubled() -> None:
    old = {"key": BAD_NODE_TAINT_KEY, "value": "intra", "effect": BAD_NODE_TAINT_EFFECT}
    new = {"key": BAD_NODE_TAINT_KEY, "value": "inter", "effect": BAD_NODE_TAINT_EFFECT}
    assert taints_with([GPU_TAINT, old], new) == [GPU_TAINT, new]
    assert taints_with([GPU_TAINT, new], new) is None
