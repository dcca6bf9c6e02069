"""Print every Kubernetes object the project builds itself for a stack, as YAML, from the builders the stack uses.

    python -m workloads --stack dev            # platform objects, then the training job's
    python -m workloads --stack p5-16 | kubectl apply --dry-run=server -f -

Helm charts and the training operator's manifests are not included: their contents are the charts' own. The
Grafana password is a placeholder here; the stack generates the real one.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import yaml

from stack.config import StackConfig
from stack.files import load_stack_config, stack_names
from workloads.job.api import job_api_for
from workloads.job.spec import job_spec
from workloads.platform.objects import platform_objects


def job_objects(config: StackConfig) -> list[dict[str, Any]]:
    """The training job's objects, from its job API's builders (workloads/job/api.py), when the stack runs a job."""
    if not config.job.enabled:
        return []
    return job_api_for(config.job.api).objects(job_spec(config))


def all_objects(config: StackConfig) -> list[dict[str, Any]]:
    return [*platform_objects(config), *job_objects(config)]


def render(config: StackConfig) -> str:
    return yaml.safe_dump_all(all_objects(config), sort_keys=False, default_flow_style=False)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workloads", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--stack", required=True, choices=stack_names(), help="a stack with a Pulumi.<stack>.yaml")
    args = parser.parse_args(argv)
    sys.stdout.write(render(load_stack_config(args.stack)))
    return 0
