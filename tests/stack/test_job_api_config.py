"""job.api chooses the PyTorchJob or the TrainJob; an unknown API, or an option only the PyTorchJob has set on a
TrainJob, fails at preview with the key and what is allowed."""

from __future__ import annotations

import pytest

from stack.fields import ConfigError
from stack.files import raw_stack_config
from stack.job_api import JOB_APIS, PYTORCHJOB, TRAINJOB, disruption_restarts, rendezvous_backend
from stack.parse import parse_stack_config
from tests.harness.pulumi_program import run_program

JOB = "fsdp-eks:job"


def parsed(stack: str, **job: object):
    raw = raw_stack_config(stack)
    raw[JOB] = {**(raw.get(JOB) or {}), **job}
    return parse_stack_config(raw, stack)


def problems_of(stack: str, **job: object) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        parsed(stack, **job)
    return raised.value.problems


def test_the_default_api_is_the_pytorchjob_with_etcd_rendezvous() -> None:
    job = parsed("p5-2").job
    assert job.api == PYTORCHJOB
    assert rendezvous_backend(job.api, job.rdzv_backend) == "etcd"


def test_a_trainjob_rendezvouses_statically() -> None:
    assert rendezvous_backend(TRAINJOB, parsed("p5-2", api=TRAINJOB).job.rdzv_backend) == "static"


def test_an_unknown_api_names_the_key_and_the_allowed_values() -> None:
    (problem,) = problems_of("p5-2", api="mpijob")
    assert problem.startswith("fsdp-eks:job.api: 'mpijob' is not allowed")
    assert all(api in problem for api in JOB_APIS)


@pytest.mark.parametrize("backend", ["etcd", "c10d"])
def test_a_rendezvous_backend_is_rejected_on_a_trainjob(backend: str) -> None:
    (problem,) = problems_of("p5-2", api=TRAINJOB, rdzvBackend=backend)
    assert problem.startswith(f"fsdp-eks:job.rdzvBackend: '{backend}' is not allowed with job.api trainjob")
    assert "expected it unset" in problem


def test_elastic_min_nodes_are_rejected_on_a_trainjob() -> None:
    (problem,) = problems_of("p5-2", api=TRAINJOB, minNodes=1)
    assert problem.startswith("fsdp-eks:job.minNodes: 1 is not allowed with job.api trainjob")


def test_the_pytorchjob_keeps_its_rendezvous_and_elastic_options() -> None:
    job = parsed("p5-2", api=PYTORCHJOB, rdzvBackend="c10d", minNodes=1).job
    assert (job.rdzv_backend, job.min_nodes, rendezvous_backend(job.api, job.rdzv_backend)) == ("c10d", 1, "c10d")


@pytest.mark.program
def test_a_trainjob_option_error_fails_the_program_before_any_resource() -> None:
    run = run_program("p5-2", {JOB: {"api": TRAINJOB, "rdzvBackend": "etcd"}})
    assert run.error is not None and run.error["kind"] == "ConfigError", run.error
    assert "job.rdzvBackend: 'etcd' is not allowed with job.api trainjob" in run.error["message"]
    assert run.resources == []


def test_a_bound_on_uncounted_gang_restarts_is_rejected_on_a_pytorchjob() -> None:
    (problem,) = problems_of("p5-2", api=PYTORCHJOB, maxDisruptionRestarts=4)
    assert problem.startswith("fsdp-eks:job.maxDisruptionRestarts: 4 is not allowed with job.api pytorchjob")


def test_a_trainjobs_bound_on_uncounted_gang_restarts_defaults_to_twice_its_nodes_at_least_10() -> None:
    assert disruption_restarts(None, nodes=2) == 10
    assert disruption_restarts(None, nodes=16) == 32  # a rolling update of the node group drains every node, twice
    assert disruption_restarts(3, nodes=16) == 3
