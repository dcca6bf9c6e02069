"""Every stack file's config and job spec, computed once: the pure inputs of the job's tests.

A helper module rather than a conftest.py, so the job's tests and the platform's can share tests/workloads/.
"""

from __future__ import annotations

from functools import cache

from stack.config import StackConfig
from stack.files import load_stack_config, stack_names
from workloads.job.spec import JobSpec, job_spec

STACKS = stack_names()
# A fixed image, so that specs do not depend on the source tree's content tag.
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/fsdp-eks/test/trainer:0123456789abcdef"


@cache
def config_of(stack: str) -> StackConfig:
    return load_stack_config(stack)


@cache
def spec_of(stack: str) -> JobSpec:
    return job_spec(config_of(stack), IMAGE)
