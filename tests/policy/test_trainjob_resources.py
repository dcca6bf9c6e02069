"""The pack's policies on the program's real registrations with job.api trainjob: every stack passes every mandatory
policy, and one change to the TrainJob's runtime makes exactly the policy about it fire (as
tests/policy/test_program_resources.py shows for the PyTorchJob)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from policy.props import NOT_CHECKED
from stack.fields import NAMESPACE
from stack.files import stack_names
from tests.harness.mock_runner import UNKNOWN_MARKER
from tests.harness.pulumi_program import ProgramRun, Registered, run_program
from tests.policy.engine import analyze, mandatory
from tests.policy.test_program_resources import MUTATED_STACK, PREVIEWS, _fired, _inputs, _mutated
from tests.workloads.job.trainjob_stacks import trainjob_raw_config

pytestmark = pytest.mark.program  # every test here runs __main__.py under the mocks

RUNTIME = "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime"
TRAINJOB = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
TOKEN = "hf_" + "Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDc"


def trainjob_preview(stack: str, preview: str) -> ProgramRun:
    key = f"{NAMESPACE}:job"
    run = run_program(stack, {key: trainjob_raw_config(stack)[key]}, preview=preview)
    assert run.error is None, run.error
    return run


def _node(runtime: dict[str, Any]) -> dict[str, Any]:
    (job,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    return job["template"]["spec"]["template"]["spec"]["containers"][0]


def _set_flag(runtime: dict[str, Any], flag: str, value: str) -> None:
    command = _node(runtime)["command"]
    command[command.index(flag) + 1] = value


# One change per policy about the job, made where the program makes it under job.api trainjob.
TRAINJOB_MUTATIONS: dict[str, tuple[str, Callable[[ProgramRun, Registered], Registered]]] = {
    "training-runtime-matches-node-type": (
        RUNTIME,
        _inputs(lambda r: _node(r)["resources"]["limits"].update({"nvidia.com/gpu": "4"})),
    ),
    "job-memory-fits-gpu": (
        RUNTIME,
        _inputs(lambda r: (_set_flag(r, "--model", "llama2-70b"), _set_flag(r, "--sharding-strategy", "NO_SHARD"))),
    ),
    "hf-token-only-from-secrets-manager": (
        TRAINJOB,
        _inputs(lambda j: j["spec"]["trainer"].update(env=[{"name": "HF_TOKEN", "value": TOKEN}])),
    ),
}


@pytest.mark.parametrize("preview", PREVIEWS)
@pytest.mark.parametrize("stack", stack_names())
def test_every_trainjob_stack_passes_every_mandatory_policy(stack: str, preview: str) -> None:
    run = trainjob_preview(stack, preview)
    assert run.of_type(RUNTIME) and run.of_type(TRAINJOB)
    assert mandatory(analyze(run.resources)) == []


@pytest.mark.parametrize("preview", PREVIEWS)
@pytest.mark.parametrize("policy", sorted(TRAINJOB_MUTATIONS))
def test_a_changed_trainjob_registration_fires_exactly_its_policy(policy: str, preview: str) -> None:
    run = trainjob_preview(MUTATED_STACK, preview)
    type_token, change = TRAINJOB_MUTATIONS[policy]
    assert _fired(run.resources) == set()
    assert _fired(_mutated(run, type_token, change)) == {policy}


# A value of the runtime a preview could show unknown: exactly the runtime's policy says "not checked".
TRAINJOB_UNKNOWN_DURING_PREVIEW: dict[str, tuple[str, Callable[[ProgramRun, Registered], Registered]]] = {
    "training-runtime-matches-node-type": (
        RUNTIME,
        _inputs(lambda r: _node(r)["resources"]["limits"].update({"nvidia.com/gpu": UNKNOWN_MARKER})),
    ),
}


@pytest.mark.parametrize("policy", sorted(TRAINJOB_UNKNOWN_DURING_PREVIEW))
def test_a_runtime_value_unknown_during_a_first_preview_is_not_checked_by_exactly_its_policy(policy: str) -> None:
    run = trainjob_preview(MUTATED_STACK, "first")
    type_token, change = TRAINJOB_UNKNOWN_DURING_PREVIEW[policy]
    found = mandatory(analyze(_mutated(run, type_token, change)))
    assert {v.policy for v in found} == {policy}
    assert all(v.message.startswith(NOT_CHECKED) for v in found), found
