"""A drill's recovery as the local run reports it (local/report.py recovery): from the last step the leader logged
before the fault to the first step a later start of the workers logged after it."""

from __future__ import annotations

from local.report import recovery

TOKENS_PER_STEP = 2048


def record(step: int, time: float, restarts: int = 0, resumed_at: int = 0) -> dict[str, float]:
    return {"step": step, "time": time, "restarts": restarts, "tokens": (step - resumed_at) * TOKENS_PER_STEP}


def test_the_first_step_of_the_next_start_ends_the_recovery_not_a_late_step_of_the_old_one() -> None:
    records = [record(9, 100.0), record(10, 101.0), record(11, 102.5), record(11, 130.0, restarts=1, resumed_at=10)]
    found = recovery(records, fired_at=102.0)  # step 11 of the dying start was logged after the fault
    assert found is not None and (found.last_step, found.first_step, found.seconds) == (10, 11, 29.0)


def test_a_start_whose_count_began_again_is_known_by_its_tokens() -> None:
    """etcd came back empty: the agreed start count is 0 again, the tokens count from the resumed step."""
    records = [record(10, 101.0), record(11, 125.0, restarts=0, resumed_at=10)]
    found = recovery(records, fired_at=102.0)
    assert found is not None and found.first_step == 11 and found.seconds == 24.0


def test_no_recovery_without_a_step_before_the_fault_or_a_later_start_after_it() -> None:
    assert recovery([record(10, 105.0)], fired_at=102.0) is None
    assert recovery([record(10, 101.0), record(11, 103.0)], fired_at=102.0) is None
