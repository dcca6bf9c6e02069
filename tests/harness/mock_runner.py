"""Run the project's __main__.py under the Pulumi SDK's mocks, as `pulumi preview` would run it, and print what
it registered as JSON. Run in a fresh process per stack (see pulumi_program.py), with the stack's config in the
PULUMI_CONFIG environment variable exactly as the engine passes it.

Two kinds of preview (tests/harness/preview_runs.py): "update", the stack exists and every resource has its id and
outputs (the default), and "first", nothing exists yet.

Usage: python -m tests.harness.mock_runner STACK OUT.json [update|first]
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import runpy
import sys
import traceback
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks, rpc
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.settings import get_root_resource
from pulumi.runtime.stack import Stack
from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await

from stack.fields import ConfigError
from stack.paths import PROJECT_ROOT
from tests.harness.fake_cloud import FakeCloud, child_reference
from tests.harness.fake_eks import Child
from tests.harness.preview_runs import PREVIEW_CLOUDS

SECRET_SENTINEL = "[secret]"
UNKNOWN_MARKER = "$unknown"


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
    if isinstance(value, Child):
        return {"$child": value.type, "id": value.id, **_plain(value.state)}
    if type(value).__name__ == "Unknown":
        return UNKNOWN_MARKER
    return repr(value)


class RecordingMonitor(mocks.MockMonitor):
    """The SDK's mock monitor, also keeping the registration options the mocks API leaves out (parent,
    dependencies, provider, replace settings) and the outputs the fake returned, so tests can check ordering,
    provider wiring and what the program read. Resources a component returns as outputs (pulumi-eks's
    `eksCluster`, a ManagedNodeGroup's `nodeGroup`) travel as resource references, as the engine sends them,
    and the program reads them back through the engine's getResource call. The stack's transforms run on every
    registration before the fake or the record sees it, as the engine's resource monitor runs them (pulumi/pulumi
    pkg/resource/deploy/source_eval.go, RegisterResource appends `rm.stackTransforms` to the transforms it runs);
    the SDK's mock monitor only collects them."""

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

    # The base builds its response as a class of its own per call, and so does this override: the checker reads the
    # two classes as different types.
    def SupportsFeature(self, request):  # noqa: N802 - the gRPC method name  # pyright: ignore[reportIncompatibleMethodOverride]
        if request.id == "resourceReferences":
            return type("SupportsFeatureResponse", (object,), {"hasSupport": False})
        return super().SupportsFeature(request)

    def RegisterResource(self, request):  # noqa: N802 - the gRPC method name
        urn = self.make_urn(request.parent, request.type, request.name)
        if request.type == "pulumi:pulumi:Stack":
            return resource_pb2.RegisterResourceResponse(urn=urn)
        _ensure_event_loop()
        inputs = self._transformed(request, rpc.deserialize_properties(request.object))
        self.fake.current_urn = urn
        resource_id, state = self.fake.new_resource(
            mocks.MockResourceArgs(
                typ=request.type,
                name=request.name,
                inputs=inputs,
                provider=request.provider,
                resource_id=request.importId,
                custom=request.custom or False,
            )
        )
        wire_state = {key: self._as_reference(value, urn) for key, value in state.items()}
        self.resources[urn] = mocks.MockMonitor.ResourceRegistration(urn, resource_id, wire_state)
        # Inputs come from the mocks' own deserialisation: decoding request.object a second time here would
        # re-enter the event loop on resource references and hang.
        self.records.append(
            {
                "type": request.type,
                "name": request.name,
                "urn": urn,
                "id": resource_id,
                "custom": request.custom,
                "parent": request.parent,
                "provider": request.provider,
                "dependencies": list(request.dependencies),
                "propertyDependencies": {k: list(v.urns) for k, v in request.propertyDependencies.items()},
                "deleteBeforeReplace": request.deleteBeforeReplace,
                "replaceOnChanges": list(request.replaceOnChanges),
                "retainOnDelete": request.retainOnDelete,
                # The resource hooks bound to it, by name (a delete hook must be named: Pulumi "Resource option:
                # hooks").
                "hooks": {
                    "beforeDelete": list(request.hooks.before_delete),
                    "afterDelete": list(request.hooks.after_delete),
                },
                # The SDK sends alias specs (the mock monitor supports "aliasSpecs"); the engine resolves them.
                "aliases": [
                    {"urn": a.urn, "name": a.spec.name, "type": a.spec.type, "parentUrn": a.spec.parentUrn}
                    for a in request.aliases
                ],
                # A remote component is constructed by its provider; the engine never analyzes these inputs.
                "remote": request.remote,
                "inputs": _plain(inputs),
                "outputs": _plain(state),
            }
        )
        props = _sync_await(rpc.serialize_properties(wire_state, {}))
        return resource_pb2.RegisterResourceResponse(urn=urn, id=resource_id or "", object=props)

    def _child_transformed(self, child: Child) -> dict[str, Any]:
        """A component's child's properties after the stack's transforms."""
        props = child.state
        for transform in self._stack_transforms:
            result = transform(
                pulumi.ResourceTransformArgs(True, child.type, child.name, props, pulumi.ResourceOptions())
            )
            result = _sync_await(result) if inspect.isawaitable(result) else result
            props = dict(result.props) if result is not None else props
        return props

    def _transformed(self, request: Any, inputs: dict[str, Any]) -> dict[str, Any]:
        """The registration's properties after the stack's transforms, in the order they were registered."""
        for transform in self._stack_transforms:
            args = pulumi.ResourceTransformArgs(
                request.custom, request.type, request.name, inputs, pulumi.ResourceOptions()
            )
            result = transform(args)
            result = _sync_await(result) if inspect.isawaitable(result) else result
            inputs = dict(result.props) if result is not None else inputs
        return inputs

    def _as_reference(self, value: Any, owner_urn: str) -> Any:
        """A Child becomes a resource reference, registered so that the program's getResource call finds it. The
        component's provider registers it through the engine, which runs the stack's transforms on it as on any
        registration (source_eval.go, as above): its state is the transformed properties."""
        if not isinstance(value, Child):
            return value
        value.state = self._child_transformed(value)
        child_urn = self.make_urn(owner_urn, value.type, value.name)
        self.resources[child_urn] = mocks.MockMonitor.ResourceRegistration(child_urn, value.id, value.state)
        return child_reference(value, child_urn)


class LogRecorder(logging.Handler):
    """Keeps what the program logs through pulumi.log (warnings show in `pulumi preview`)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[dict[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append({"severity": record.levelname.lower(), "message": record.getMessage()})


def _resolve_outputs() -> dict[str, Any]:
    stack = get_root_resource()
    assert isinstance(stack, Stack), "the program ran without its root stack resource"
    resolved: dict[str, Any] = {}
    for name, value in stack.outputs.items():
        output = pulumi.Output.from_input(value)
        plain = _resolve_known(value)
        resolved[name] = SECRET_SENTINEL if _sync_await(output.is_secret()) else plain
        resolved[f"{name}.__plain"] = plain  # the value itself, for tests that look for leaks
    return resolved


def _resolve_known(value: Any) -> Any:
    """An exported value as the engine records it: a plain dict or list keeps its known entries, and only an Output
    that is unknown at preview is None (the SDK serialises each nested Output on its own, pulumi/runtime/rpc.py
    serialize_property), where Output.from_input of the whole would make all of it unknown."""
    if isinstance(value, dict):
        return {key: _resolve_known(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_resolve_known(item) for item in value]
    return _plain(_sync_await(pulumi.Output.from_input(value).future()))


def config_error_in(error: BaseException) -> ConfigError | None:
    """The ConfigError behind `error`: raised before any resource, or inside an apply, where the SDK reports it as the
    cause of the registration that awaited the value (the engine prints the same message and fails the preview)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, ConfigError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _run_program() -> None:
    runpy.run_path(str(PROJECT_ROOT / "__main__.py"), run_name="__main__")


def stack_region() -> str:
    """aws:region from PULUMI_CONFIG, as the engine passed it."""
    return json.loads(os.environ.get("PULUMI_CONFIG", "{}")).get("aws:region") or "us-east-1"


def run(stack: str, preview: str = "update") -> dict[str, Any]:
    fake = PREVIEW_CLOUDS[preview](stack_region())
    monitor = RecordingMonitor(fake)
    recorder = LogRecorder()
    logger = logging.getLogger("fsdp-eks-mocks")
    logger.setLevel(logging.INFO)
    logger.addHandler(recorder)
    logger.propagate = False
    mocks.set_mocks(fake, project="fsdp-eks", stack=stack, preview=True, logger=logger, monitor=monitor)
    result: dict[str, Any] = {"stack": stack, "error": None, "resources": [], "outputs": {}, "log": []}
    try:
        _sync_await(mocks.run_pulumi_func(_run_program))
        result["outputs"] = _resolve_outputs()
    except Exception as error:
        refusal = config_error_in(error)
        if refusal is not None:
            result["error"] = {"kind": "ConfigError", "problems": refusal.problems, "message": str(refusal)}
        else:
            result["error"] = {"kind": type(error).__name__, "message": "".join(traceback.format_exception(error))}
    result["resources"] = monitor.records
    result["log"] = recorder.messages
    result["invokes"] = sorted(set(fake.invokes))
    return result


if __name__ == "__main__":
    stack_name, out_path, *kind = sys.argv[1:]
    Path(out_path).write_text(json.dumps(run(stack_name, *kind), indent=1, default=repr))
