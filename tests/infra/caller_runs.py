"""Run the program under the mock harness as a given AWS principal: the fake cloud (tests/harness/fake_aws.py)
answers sts:GetCallerIdentity with the deploying role's session; here a run answers it with another caller's ARN, as
a CI preview (the preview role) and the `pulumi up --plan` after it (the deploy role) do.

    run = run_as("arn:aws:sts::123456789012:assumed-role/fsdp-eks-ci-preview/GitHubActions", "p5-2", overrides)

Like tests/harness/pulumi_program.py, each run is a fresh process (python -m tests.infra.caller_runs), so the Pulumi
runtime's global state does not leak between runs; the process swaps the cloud the mock runner plays for one that
answers as the caller, and nothing else.

Usage: CALLER_ARN=... python -m tests.infra.caller_runs STACK OUT.json [update|first]
"""

from __future__ import annotations

import json
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from pulumi.runtime import mocks

from stack.files import raw_stack_config
from tests.harness import mock_runner
from tests.harness.fake_cloud import FakeCloud
from tests.harness.preview_runs import PREVIEW_CLOUDS
from tests.harness.pulumi_program import ProgramRun, engine_config, run_in_process, with_deployers_address

CALLER_IDENTITY = "aws:index/getCallerIdentity:getCallerIdentity"
CALLER_ENV = "CALLER_ARN"


def as_caller(cloud: type[FakeCloud], caller_arn: str) -> type[FakeCloud]:
    """`cloud`, answering sts:GetCallerIdentity as `caller_arn` (the account stays the fake's)."""

    class CallerCloud(cloud):  # type: ignore[valid-type, misc]
        def call(self, args: mocks.MockCallArgs) -> tuple[dict, list | None]:
            answer, failures = super().call(args)
            if args.token == CALLER_IDENTITY:
                answer = {**answer, "arn": caller_arn, "userId": f"AROACALLER:{caller_arn.rsplit('/', 1)[-1]}"}
            return answer, failures

    return CallerCloud


def run_as(caller_arn: str, stack: str, overrides: dict[str, Any] | None = None, preview: str = "update") -> ProgramRun:
    """The program's run for `stack` (the stack file with top-level keys replaced) as `caller_arn`."""
    raw = raw_stack_config(stack) | (overrides or {})
    raw = with_deployers_address(raw) if preview == "first" else raw
    return _run(caller_arn, stack, engine_config(raw), preview)


@lru_cache(maxsize=16)
def _run(caller_arn: str, stack: str, config_json: str, preview: str) -> ProgramRun:
    env = {"PULUMI_CONFIG": config_json, "PULUMI_CONFIG_SECRET_KEYS": "[]", CALLER_ENV: caller_arn}
    return run_in_process("tests.infra.caller_runs", stack, env, preview)


if __name__ == "__main__":
    stack_name, out_path, kind = sys.argv[1:]
    # This process only: the mock runner plays the cloud it finds under `kind`.
    mock_runner.PREVIEW_CLOUDS[kind] = as_caller(PREVIEW_CLOUDS[kind], os.environ[CALLER_ENV])
    Path(out_path).write_text(json.dumps(mock_runner.run(stack_name, kind), indent=1, default=repr))
