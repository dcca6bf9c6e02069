"""Register the Platform component of one stack under the Pulumi SDK's mocks and write what was registered as JSON:
the component tested on its own, with the cluster's provider and a stand-in for the GPU node group.

Usage: python -m tests.workloads.platform.platform_program STACK OUT.json [CONFIG_OVERRIDES_JSON]
CONFIG_OVERRIDES_JSON replaces whole config keys, e.g. '{"fsdp-eks:monitoring": {"grafanaLoadBalancer": true}}'.
Run in a fresh process per configuration (see run_platform; a child of the harness's warm server): the Pulumi runtime
keeps global state.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random
from pulumi.runtime import mocks
from pulumi.runtime.sync_await import _sync_await

from stack.files import raw_stack_config
from stack.parse import parse_stack_config
from tests.harness.mock_runner import FakeCloud, RecordingMonitor
from tests.harness.pulumi_program import Registered, registered, run_module

PROVIDER_NAME = "cluster-k8s"
GPU_NODES_NAME = "gpu-node-group"


def program(stack: str, overrides: dict[str, Any]) -> None:
    from workloads.platform.component import Platform, PlatformArgs

    config = parse_stack_config({**raw_stack_config(stack), **overrides}, stack)
    provider = k8s.Provider(PROVIDER_NAME, kubeconfig="{}")
    gpu_nodes = random.RandomId(GPU_NODES_NAME, byte_length=4)  # a custom resource standing in for the node group
    platform = Platform("platform", PlatformArgs(provider=provider, config=config, depends_on=[gpu_nodes]))
    pulumi.export("nextCommands", platform.next_commands)
    pulumi.export("etcdEndpoint", platform.etcd_endpoint)


def run(stack: str, overrides: dict[str, Any]) -> dict[str, Any]:
    fake = FakeCloud()
    monitor = RecordingMonitor(fake)
    mocks.set_mocks(fake, project="fsdp-eks", stack=stack, preview=False, monitor=monitor)
    _sync_await(mocks.run_pulumi_func(lambda: program(stack, overrides)))
    from pulumi.runtime.settings import get_root_resource
    from pulumi.runtime.stack import Stack

    stack_resource = get_root_resource()
    assert isinstance(stack_resource, Stack), "the program ran without its root stack resource"
    outputs = {
        name: _sync_await(pulumi.Output.from_input(value).future()) for name, value in stack_resource.outputs.items()
    }
    return {"resources": monitor.records, "outputs": outputs}


@dataclass(frozen=True)
class PlatformRun:
    resources: list[Registered]
    outputs: dict[str, Any]

    def of_type(self, type_token: str) -> list[Registered]:
        return [r for r in self.resources if r.type == type_token]

    def named(self, name: str) -> Registered:
        return next(r for r in self.resources if r.name == name)

    def one_named(self, kind: str, object_name: str) -> Registered:
        """The Kubernetes object of `kind` (lower case) whose metadata.name is `object_name`."""
        (found,) = [
            r
            for r in self.resources
            if r.type.lower().endswith(f":{kind}") and (r.inputs.get("metadata") or {}).get("name") == object_name
        ]
        return found


@lru_cache(maxsize=16)
def run_platform(stack: str, overrides_json: str = "{}") -> PlatformRun:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        _, output = run_module("tests.workloads.platform.platform_program", [stack, str(out), overrides_json])
        if not out.exists():
            raise RuntimeError(f"platform mock run of {stack} crashed:\n{output}")
        data = json.loads(out.read_text())
    return PlatformRun(registered(data["resources"]), data["outputs"])


if __name__ == "__main__":
    stack_name, out_path = sys.argv[1], sys.argv[2]
    extra = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    Path(out_path).write_text(json.dumps(run(stack_name, extra), indent=1, default=repr))
