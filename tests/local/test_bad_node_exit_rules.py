"""What each job API's controller does with a pod whose launcher exited 201 (EXIT_BAD_NODE), as the local models of
their sources decide it: the Training Operator creates the pod again (ExitCode, retryable), and the TrainJob's JobSet
restarts the gang, counted (no rule names 201: a bad node is neither final nor a disruption). The taint, not the
controllers, keeps the new pod off the node (trainer/launch/node_taint.py)."""

from __future__ import annotations

import pytest

from local.pytorchjob.restart_policy import EXIT_CODE, Action, container_exit
from local.trainjob.jobset_policy import Verdict
from tests.workloads.job.job_stacks import spec_of
from tests.workloads.job.trainjob_stacks import STACKS
from trainer.base.pod.exits import EXIT_BAD_NODE, FINAL_EXITS, is_retryable
from workloads.job.pytorchjob import CONTAINER_NAME, pod_template

from .test_trainjob_failure_policy import outcome_of


def test_bad_node_is_retryable_and_never_final() -> None:
    assert is_retryable(EXIT_BAD_NODE) and EXIT_BAD_NODE not in FINAL_EXITS


def test_the_training_operator_creates_the_pod_of_a_bad_node_again() -> None:
    pod = pod_template(spec_of("dev"))["spec"]
    outcome = container_exit(EXIT_CODE, pod, CONTAINER_NAME, EXIT_BAD_NODE, restarts=0, backoff_limit=3)
    assert outcome is not None and outcome.action is Action.RECREATE, outcome


@pytest.mark.parametrize("stack", STACKS)
def test_the_jobset_restarts_the_gang_of_a_bad_node_counted(stack: str) -> None:
    outcome = outcome_of(stack, "node", EXIT_BAD_NODE)
    assert (outcome.verdict, outcome.counted) == (Verdict.RESTART, True), outcome.why
