"""A TrainJob's gang restarts as JobSet numbers them (trainer/launch/gang.py): the restart count the workers report, and
the bound past which the launcher starts nothing and exits with a final code."""

from __future__ import annotations

import pytest

from trainer.base.pod.exits import EXIT_GANG_RESTARTS_SPENT, FINAL_EXITS
from trainer.base.pod.gang_restarts import RESTART_ATTEMPT_VARIABLE, RESTART_LIMIT_VARIABLE
from trainer.launch.gang import gang_restarts, restarts_spent
from trainer.launch.launcher import stage_then_launch

TORCHRUN = ["--standalone", "--nnodes=1", "--nproc-per-node=1", "-m", "trainer", "--model", "tiny"]


def test_the_restart_attempt_is_0_where_no_jobset_labels_the_pod() -> None:
    assert gang_restarts({}) == 0
    assert gang_restarts({RESTART_ATTEMPT_VARIABLE: ""}) == 0  # the downward API's value for a missing label
    assert gang_restarts({RESTART_ATTEMPT_VARIABLE: "3"}) == 3


def test_a_gang_within_its_bound_starts() -> None:
    assert restarts_spent({RESTART_ATTEMPT_VARIABLE: "4", RESTART_LIMIT_VARIABLE: "4"}) is None
    assert restarts_spent({RESTART_ATTEMPT_VARIABLE: "9"}) is None  # no bound given: a PyTorchJob's pod


def test_a_gang_past_its_bound_is_refused_naming_both_numbers() -> None:
    reason = restarts_spent({RESTART_ATTEMPT_VARIABLE: "5", RESTART_LIMIT_VARIABLE: "4"})
    assert reason is not None and "restarted the gang 5 times" in reason and "bound of 4" in reason


def test_the_launcher_of_a_gang_past_its_bound_starts_nothing_and_exits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RESTART_ATTEMPT_VARIABLE, "11")
    monkeypatch.setenv(RESTART_LIMIT_VARIABLE, "10")
    end, raised = stage_then_launch(TORCHRUN, stage=True)  # returns before staging: nothing is staged or launched
    assert (end.code, raised, end.closes_rendezvous) == (EXIT_GANG_RESTARTS_SPENT, None, False)
    assert EXIT_GANG_RESTARTS_SPENT in FINAL_EXITS  # the runtime's podFailurePolicy fails the JobSet on it
    assert end.line().startswith("trainer.launch: exit 6 (gang restarts spent), permanent: the JobSet has restarted")
