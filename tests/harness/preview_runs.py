"""The kinds of `pulumi preview` the mock runner plays (tests/harness/mock_runner.py), for the policy pack's engine
view (tests/policy/engine_view.py) and the CI preview role:

- "update": the stack exists; every resource has its id and outputs: the fake cloud as it is (fake_cloud.py).
- "first": nothing exists yet. The engine answers a registration during preview with an empty id, and the providers'
  preview of a create echoes the inputs and leaves every computed output unknown (pulumi/pulumi
  pkg/resource/deploy/step.go CreateStep.Apply passes Preview to the provider's Create; the Python SDK resolves an
  empty id and every output missing from the response as unknown during a preview: pulumi/runtime/resource.py,
  rpc.resolve_properties). So a custom resource answers ("", its inputs) and a component answers nothing, which
  leaves an id, an ARN or a remote component's outputs unknown wherever the program reads them.

Both refuse what the fake cloud does not model, and both note the data sources the program calls.
"""

from __future__ import annotations

from pulumi.runtime import mocks

from tests.harness.fake_cloud import STACK_REFERENCE, FakeCloud, refuse_unmodeled


class FirstPreviewCloud(FakeCloud):
    """Nothing exists yet: no ids, no computed outputs, no outputs of components."""

    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str, dict]:
        if args.typ == STACK_REFERENCE:
            return super().new_resource(args)  # a read: a preview reads the referenced stack's outputs as they are
        refuse_unmodeled(args.typ, args.custom)
        inputs = dict(args.inputs)
        self.inputs[(args.typ, args.name)] = inputs
        self.outputs[(args.typ, args.name)] = inputs if args.custom else {}
        return "", self.outputs[(args.typ, args.name)]


PREVIEW_CLOUDS: dict[str, type[FakeCloud]] = {"update": FakeCloud, "first": FirstPreviewCloud}
