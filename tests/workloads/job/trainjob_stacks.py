"""Every stack file with `job.api: trainjob`: the same stacks, run as a Kubeflow Trainer v2 TrainJob.

A helper module like job_stacks.py: the variants are built from the stack files themselves, so a new stack file is
covered under both APIs without a second file.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from stack.config import StackConfig
from stack.fields import NAMESPACE
from stack.files import raw_stack_config
from stack.job_api import TRAINJOB
from stack.parse import parse_stack_config
from workloads.job.spec import JobSpec, job_spec

from .job_stacks import IMAGE, STACKS

__all__ = ["STACKS", "trainjob_config_of", "trainjob_raw_config", "trainjob_spec_of"]


def trainjob_raw_config(stack: str) -> dict[str, Any]:
    """The stack file's raw config with job.api set to trainjob and nothing else changed."""
    raw = raw_stack_config(stack)
    key = f"{NAMESPACE}:job"
    job = raw.get(key) or {}
    raw[key] = {**(json.loads(job) if isinstance(job, str) else job), "api": TRAINJOB}
    return raw


@cache
def trainjob_config_of(stack: str) -> StackConfig:
    return parse_stack_config(trainjob_raw_config(stack), stack)


@cache
def trainjob_spec_of(stack: str) -> JobSpec:
    return job_spec(trainjob_config_of(stack), IMAGE)
