"""Run the program under the mock harness with a Price List API that refuses the call, as AWS does for a role without
pricing:GetProducts, to see the preview go on with the catalog's labelled figure.

    run = refused_price_list_run("p5-2")

A fresh process per run (python -m tests.infra.price_runs), as tests/infra/caller_runs.py does for another caller.

Usage: python -m tests.infra.price_runs STACK OUT.json [update|first]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pulumi.runtime import mocks

from stack.files import raw_stack_config
from tests.harness import mock_runner
from tests.harness.fake_cloud import FakeCloud
from tests.harness.fake_price_list import GET_PRODUCT, PriceListRefusalError
from tests.harness.preview_runs import PREVIEW_CLOUDS
from tests.harness.pulumi_program import ProgramRun, engine_config, run_in_process

# The error AWS gives a caller without the permission (the API's AccessDeniedException), as the provider reports it.
ACCESS_DENIED = (
    "reading Pricing Products: operation error Pricing: GetProducts, https response error StatusCode: 400, "
    "AccessDeniedException: User is not authorized to perform: pricing:GetProducts"
)


def refusing(cloud: type[FakeCloud]) -> type[FakeCloud]:
    class RefusingCloud(cloud):  # type: ignore[valid-type, misc]
        def call(self, args: mocks.MockCallArgs) -> tuple[dict, list | None]:
            if args.token == GET_PRODUCT:
                self.invokes.append(args.token)
                raise PriceListRefusalError(ACCESS_DENIED)
            return super().call(args)

    return RefusingCloud


def refused_price_list_run(stack: str, preview: str = "update") -> ProgramRun:
    env = {"PULUMI_CONFIG": engine_config(raw_stack_config(stack)), "PULUMI_CONFIG_SECRET_KEYS": "[]"}
    return run_in_process("tests.infra.price_runs", stack, env, preview)


if __name__ == "__main__":
    stack_name, out_path, kind = sys.argv[1:]
    mock_runner.PREVIEW_CLOUDS[kind] = refusing(PREVIEW_CLOUDS[kind])
    Path(out_path).write_text(json.dumps(mock_runner.run(stack_name, kind), indent=1, default=repr))
