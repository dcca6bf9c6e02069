"""A TrainJob's runtime pins its trainer step to a catalog instance type with all its GPUs and EFA devices; a runtime
whose trainer step the check cannot see during a preview is "not checked"."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from policy.jobs.trainjob import RUNTIME, runtime_node_type_violations
from policy.props import NOT_CHECKED, UNKNOWN
from stack.job_api import ANCESTOR_LABEL
from tests.workloads.job.trainjob_stacks import trainjob_spec_of
from workloads.job.trainjob import training_runtime


def _runtime(stack: str = "p5-2") -> dict[str, Any]:
    return copy.deepcopy(training_runtime(trainjob_spec_of(stack)))


def _step(runtime: dict[str, Any]) -> dict[str, Any]:
    (job,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    return job


def test_the_programs_runtime_passes() -> None:
    assert runtime_node_type_violations(RUNTIME, _runtime()) == []


@pytest.mark.parametrize(
    "change,what",
    [
        (lambda r: r["spec"]["template"]["spec"].update(replicatedJobs=UNKNOWN), "unknown"),
        (lambda r: _step(r)["template"]["metadata"]["labels"].update({ANCESTOR_LABEL: UNKNOWN}), "unknown"),
        (lambda r: _step(r)["template"]["metadata"].update(labels={}), "no step labelled"),
        (lambda r: _step(r)["template"]["spec"]["template"]["spec"].update(nodeSelector=UNKNOWN), "instance type"),
        (lambda r: _step(r)["template"]["spec"]["template"]["spec"].update(containers=UNKNOWN), "requests"),
    ],
)
def test_a_trainer_step_the_check_cannot_see_is_not_checked(change, what: str) -> None:
    runtime = _runtime()
    change(runtime)
    (problem,) = runtime_node_type_violations(RUNTIME, runtime)
    assert problem.startswith(NOT_CHECKED) and what in problem
