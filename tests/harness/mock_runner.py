"""Run the project's __main__.py under the Pulumi SDK's mocks, as `pulumi preview` would run it, and print what
it registered as JSON. Run in a fresh process per stack (see pulumi_program.py), with the stack's config in the
PULUMI_CONFIG environment variable exactly as the engine passes it.

Usage: python -m tests.harness.mock_runner STACK OUT.json
"""

from __future__ import annotations

import json
import runpy
import sys
import traceback
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.settings import get_root_resource
from pulumi.runtime.sync_await import _sync_await

from infra.config_fields import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SECRET_SENTINEL = "[secret]"


def _plain(value: Any) -> Any:
    """JSON-able view of deserialized inputs: unknowns and resource references become markers."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, pulumi.Resource):
        return {"$resource": type(value).__name__}
    return repr(value)


class FakeCloud(mocks.Mocks):
    """Plays AWS: ids and the few outputs the program reads; invokes answer like the real data sources."""

    def __init__(self) -> None:
        self.inputs: dict[tuple[str, str], dict[str, Any]] = {}

    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str, dict]:
        self.inputs[(args.typ, args.name)] = _plain(args.inputs)
        state = dict(args.inputs)
        if args.typ == "eks:index:Cluster":
            state |= {
                "kubeconfigJson": '{"apiVersion": "v1", "kind": "Config"}',
                "clusterSecurityGroupId": "sg-cluster",
            }
        if args.typ == "aws:ec2/launchTemplate:LaunchTemplate":
            state |= {"latestVersion": 1}
        if args.typ == "aws:iam/role:Role":
            state |= {"arn": f"arn:aws:iam::123456789012:role/{args.name}", "name": args.name}
        if args.typ == "aws:ec2/placementGroup:PlacementGroup":
            state |= {"name": args.name}
        return f"{args.name}-id", state

    def call(self, args: mocks.MockCallArgs) -> tuple[dict, list | None]:
        if args.token == "aws:index/getPartition:getPartition":
            return {"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws"}, []
        if args.token == "aws:eks/getAddonVersion:getAddonVersion":
            return {
                "addonName": args.args["addonName"],
                "version": f"{args.args['addonName']}-default",
                "kubernetesVersion": args.args["kubernetesVersion"],
                "id": "x",
            }, []
        if args.token == "aws:ecr/getAuthorizationToken:getAuthorizationToken":
            return {
                "userName": "AWS",
                "password": "mock",
                "proxyEndpoint": "https://123456789012.dkr.ecr.us-east-1.amazonaws.com",
                "authorizationToken": "mock",
                "id": "x",
            }, []
        return {}, []


class RecordingMonitor(mocks.MockMonitor):
    """The SDK's mock monitor, also keeping the registration options the mocks API leaves out (parent,
    dependencies, provider, replace settings), so tests can check ordering and provider wiring."""

    def __init__(self, fake: FakeCloud):
        super().__init__(fake)
        self.fake = fake
        self.records: list[dict[str, Any]] = []

    def GetDeploymentInfo(self, request):  # noqa: N802 - the gRPC method name
        # Without resource-reference support, a resource passed as an input (a Cluster to a ManagedNodeGroup)
        # travels as its URN or id, as it would to an engine without references. With it, the mock rebuilds a
        # Resource object on its worker thread's event loop, which races the program's loop and fails at random.
        info = super().GetDeploymentInfo(request)
        kept = [f for f in info.supportedFeatures if f != resource_pb2.RESOURCE_MONITOR_FEATURE_RESOURCE_REFERENCES]
        return resource_pb2.DeploymentInfo(supportedFeatures=kept)

    def SupportsFeature(self, request):  # noqa: N802 - the gRPC method name
        if request.id == "resourceReferences":
            return type("SupportsFeatureResponse", (object,), {"hasSupport": False})
        return super().SupportsFeature(request)

    def RegisterResource(self, request):  # noqa: N802 - the gRPC method name
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            # Inputs come from the mocks' own deserialisation: decoding request.object a second time here
            # would re-enter the event loop on resource references and hang.
            self.records.append(
                {
                    "type": request.type,
                    "name": request.name,
                    "urn": response.urn,
                    "custom": request.custom,
                    "parent": request.parent,
                    "provider": request.provider,
                    "dependencies": list(request.dependencies),
                    "deleteBeforeReplace": request.deleteBeforeReplace,
                    "replaceOnChanges": list(request.replaceOnChanges),
                    "inputs": self.fake.inputs.get((request.type, request.name), {}),
                    # A remote component is constructed by its provider; the engine never analyzes these inputs.
                    "remote": request.remote,
                    "propertyDependencies": {k: list(v.urns) for k, v in request.propertyDependencies.items()},
                }
            )
        return response


def _resolve_outputs() -> dict[str, Any]:
    stack = get_root_resource()
    resolved: dict[str, Any] = {}
    for name, value in stack.outputs.items():
        output = pulumi.Output.from_input(value)
        plain = _sync_await(output.future())
        resolved[name] = SECRET_SENTINEL if _sync_await(output.is_secret()) else _plain(plain)
        resolved[f"{name}.__plain"] = _plain(plain)  # the value itself, for tests that look for leaks
    return resolved


def run(stack: str, fake: FakeCloud | None = None) -> dict[str, Any]:
    fake = fake or FakeCloud()
    monitor = RecordingMonitor(fake)
    mocks.set_mocks(fake, project="fsdp-eks", stack=stack, preview=True, monitor=monitor)
    result: dict[str, Any] = {"stack": stack, "error": None, "resources": [], "outputs": {}}
    try:
        _sync_await(
            mocks.run_pulumi_func(lambda: runpy.run_path(str(PROJECT_ROOT / "__main__.py"), run_name="__main__"))
        )
        result["outputs"] = _resolve_outputs()
    except ConfigError as error:
        result["error"] = {"kind": "ConfigError", "problems": error.problems, "message": str(error)}
    except Exception as error:
        result["error"] = {"kind": type(error).__name__, "message": "".join(traceback.format_exception(error))}
    result["resources"] = monitor.records
    return result


if __name__ == "__main__":
    stack_name, out_path = sys.argv[1], sys.argv[2]
    Path(out_path).write_text(json.dumps(run(stack_name), indent=1, default=repr))
