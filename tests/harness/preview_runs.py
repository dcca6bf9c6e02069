"""__main__.py under mocks as a real `pulumi preview` runs it, for the policy pack's engine view
(tests/policy/engine_view.py).

Two kinds of preview:
- "update": the stack exists; every resource has its id and outputs (the mock runner's FakeCloud as it is).
- "first": nothing exists yet. The engine answers a registration during preview with an empty id, and the providers'
  preview of a create echoes the inputs and leaves every computed output unknown (pulumi/pulumi
  pkg/resource/deploy/step.go CreateStep.Apply passes Preview to the provider's Create; the Python SDK resolves an
  empty id and every output missing from the response as unknown during a preview: pulumi/runtime/resource.py,
  rpc.resolve_properties). So here a custom resource answers ("", its inputs) and a component answers nothing,
  which leaves an id, an ARN or a remote component's outputs unknown wherever the program reads them.

Both record the data sources the program calls, for the preview role's permissions (ci/preview_policy.py), and
both run the program's stack transforms on every registration before recording it, as the engine's resource monitor
does (pkg/resource/deploy/source_eval.go: the stack's transforms run on each RegisterResource request); the SDK's
mock monitor only hands them to Mocks.register_transform.

Usage: python -m tests.harness.preview_runs {first|update} STACK OUT.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks
from pulumi.runtime.sync_await import _sync_await

from tests.harness import mock_runner


class UpdatePreviewCloud(mock_runner.FakeCloud):
    """The mock runner's cloud, also noting every data source the program calls."""

    def __init__(self) -> None:
        super().__init__()
        self.invokes: list[str] = []
        self.stack_transforms: list[pulumi.ResourceTransform] = []

    def call(self, args: mocks.MockCallArgs) -> tuple[dict, list | None]:
        self.invokes.append(args.token)
        return super().call(args)

    def register_transform(self, transform: pulumi.ResourceTransform) -> None:
        self.stack_transforms.append(transform)

    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str, dict]:
        return super().new_resource(self.transformed(args))

    def transformed(self, args: mocks.MockResourceArgs) -> mocks.MockResourceArgs:
        """The registration after the stack's transforms, in the order they were registered."""
        inputs = args.inputs
        for transform in self.stack_transforms:
            result = transform(
                pulumi.ResourceTransformArgs(args.custom, args.typ, args.name, inputs, pulumi.ResourceOptions())
            )
            result = _sync_await(result) if hasattr(result, "__await__") else result
            inputs = result.props if result is not None else inputs
        return mocks.MockResourceArgs(
            args.typ, args.name, inputs, args.provider, args.resource_id, args.custom, args.transforms
        )


class FirstPreviewCloud(UpdatePreviewCloud):
    """Nothing exists yet: no ids, no computed outputs, no outputs of components."""

    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str, dict]:
        super().new_resource(args)  # transforms and records the inputs the way the update preview does
        return "", dict(self.transformed(args).inputs) if args.custom else {}


CLOUDS = {"first": FirstPreviewCloud, "update": UpdatePreviewCloud}


def run(kind: str, stack: str) -> dict[str, Any]:
    cloud = CLOUDS[kind]()
    result = mock_runner.run(stack, cloud)
    result["invokes"] = sorted(set(cloud.invokes))
    return result


if __name__ == "__main__":
    preview_kind, stack_name, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
    Path(out_path).write_text(json.dumps(run(preview_kind, stack_name), indent=1, default=repr))
