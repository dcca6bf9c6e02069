"""Everything the project renders, for every stack and both job APIs, written to a folder so that a refactoring can
show it changed nothing: the Kubernetes objects `python -m workloads` prints, and every resource the Pulumi program
registers under the mocks (type, name, parent, provider, dependencies and inputs) with its outputs and log.

    .venv/bin/python -m tests.harness.snapshot /tmp/before      # on the commit before the change
    .venv/bin/python -m tests.harness.snapshot /tmp/after       # after it
    diff -r /tmp/before /tmp/after && echo identical

Resources are sorted by URN and dependency lists sorted (the order of registration varies from run to run);
nothing else is normalised.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stack.fields import ConfigError
from stack.files import raw_stack_config, stack_names
from stack.job_api import JOB_APIS
from stack.parse import parse_stack_config
from tests.harness.pulumi_program import JOB_KEY, run_program
from workloads.render import render


def with_api(raw: dict[str, Any], api: str) -> dict[str, Any]:
    """The stack's raw config with job.api set to `api` (a job section given as JSON text is read first)."""
    job = raw.get(JOB_KEY) or {}
    job = json.loads(job) if isinstance(job, str) else dict(job)
    return {**raw, JOB_KEY: {**job, "api": api}}


def program_record(stack: str, raw: dict[str, Any], preview: str) -> str:
    run = run_program(stack, {JOB_KEY: raw[JOB_KEY]}, preview=preview)
    resources = [
        {
            "type": r.type,
            "name": r.name,
            "parent": r.parent,
            "provider": r.provider,
            "dependencies": sorted(r.dependencies),
            "inputs": r.inputs,
            "outputs": r.outputs,
        }
        for r in sorted(run.resources, key=lambda r: r.urn)
    ]
    record = {"resources": resources, "outputs": run.outputs, "error": run.error, "log": run.log}
    return json.dumps(record, indent=1, sort_keys=True) + "\n"


def write_snapshot(out: Path, stacks: Sequence[str], apis: Sequence[str]) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for stack in stacks:
        for api in apis:
            raw = with_api(raw_stack_config(stack), api)
            rendered = out / f"{stack}.{api}.objects.yaml"
            try:
                rendered.write_text(render(parse_stack_config(raw, stack)))
            except ConfigError as refused:  # a stack whose options only the other API has: its refusal is the record
                rendered.write_text(f"refused: {refused}\n")
            written.append(rendered)
            for preview in ("update", "first"):
                path = out / f"{stack}.{api}.program-{preview}.json"
                path.write_text(program_record(stack, raw, preview))
                written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.harness.snapshot", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("out", type=Path, help="folder to write the snapshot to")
    parser.add_argument("--stack", action="append", choices=stack_names(), help="only this stack (repeatable)")
    args = parser.parse_args(argv)
    written = write_snapshot(args.out, args.stack or stack_names(), JOB_APIS)
    sys.stdout.write(f"{len(written)} files in {args.out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
