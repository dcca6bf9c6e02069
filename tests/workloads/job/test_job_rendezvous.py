"""The rendezvous id: stable for a run, new for every run, so no run meets the state an earlier one left in etcd."""

from __future__ import annotations

import dataclasses

import pytest

from stack.config import StackConfig
from workloads.job.pytorchjob import pytorchjob_manifest
from workloads.job.spec import job_spec

from .job_stacks import IMAGE, STACKS, config_of

pytestmark = pytest.mark.parametrize("stack", STACKS)


def with_job(config: StackConfig, **changes: object) -> StackConfig:
    return dataclasses.replace(config, job=dataclasses.replace(config.job, **changes))


def test_the_same_run_rendered_twice_gets_the_same_id(stack: str) -> None:
    config = config_of(stack)
    assert job_spec(config, IMAGE).rendezvous_id == job_spec(config, IMAGE).rendezvous_id
    assert pytorchjob_manifest(job_spec(config, IMAGE)) == pytorchjob_manifest(job_spec(config, IMAGE))


def test_two_runs_of_the_same_spec_get_different_ids(stack: str) -> None:
    config = config_of(stack)
    first = job_spec(with_job(config, run=1), IMAGE).rendezvous_id
    second = job_spec(with_job(config, run=2), IMAGE).rendezvous_id
    assert first != second


def test_a_changed_job_gets_a_new_id(stack: str) -> None:
    config = config_of(stack)
    before = job_spec(config, IMAGE).rendezvous_id
    assert job_spec(with_job(config, steps=config.job.steps + 1), IMAGE).rendezvous_id != before
    assert job_spec(config, IMAGE + "-rebuilt").rendezvous_id != before


def test_the_id_names_the_job_and_the_run(stack: str) -> None:
    config = config_of(stack)
    spec = job_spec(with_job(config, run=7), IMAGE)
    assert spec.rendezvous_id.startswith(f"{spec.name}-run7-")
