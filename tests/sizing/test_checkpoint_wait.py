"""Saves in the background hold training up only when the next one is due before the last is written: the sizing
says how long training waits, the preview warns with the settings that remove the wait, and the stacks shipped here
have no wait."""

from __future__ import annotations

import pytest

from sizing.fsx import checkpoint_wait_warning, estimate_storage
from stack.files import load_stack_config, raw_stack_config, stack_names
from stack.fit import checkpoint_warning, sizing_summary
from tests.harness.pulumi_program import run_program
from trainer.base.model.presets import PRESETS

SEVEN_B = estimate_storage(PRESETS["llama2-7b"], pretrained=False)  # 1200 GiB at 250 MB/s/TiB: about 276 s a save


def test_a_synchronous_save_costs_all_of_its_write_and_a_background_one_only_the_overrun() -> None:
    save_s = SEVEN_B.save_s
    assert 270 < save_s < 280  # 75.3 GiB at 293 MB/s
    assert SEVEN_B.wait_per_save_s(60.0, async_save=False) == save_s
    assert SEVEN_B.wait_per_save_s(60.0, async_save=True) == pytest.approx(save_s - 60.0)
    assert SEVEN_B.wait_per_save_s(save_s + 1, async_save=True) == 0.0


def test_seconds_per_hour_is_the_share_of_each_save_cycle_spent_waiting() -> None:
    interval_s = 100 * 0.58
    wait_s = SEVEN_B.save_s - interval_s
    expected = 3600 * wait_s / (interval_s + wait_s)
    assert SEVEN_B.seconds_per_hour(0.58, 100) == pytest.approx(expected)
    assert SEVEN_B.seconds_per_hour(0.58, 100, async_save=False) == pytest.approx(
        3600 * SEVEN_B.save_s / (interval_s + SEVEN_B.save_s)
    )
    assert SEVEN_B.seconds_per_hour(0.58, SEVEN_B.steps_per_save(0.58)) == 0.0
    waiting = SEVEN_B.seconds_per_hour(0.58, SEVEN_B.steps_per_save(0.58) - 1)
    assert waiting is not None and waiting > 0.0
    assert SEVEN_B.seconds_per_hour(None, 100) is None


def test_the_warning_names_the_interval_the_save_and_both_ways_out() -> None:
    warning = checkpoint_wait_warning(SEVEN_B, 1.14, 100)
    assert warning is not None
    assert "every 100 steps of 1.14 s (114 s)" in warning and "75.3 GiB in 276 s at 250 MB/s/TiB on 1200 GiB" in warning
    assert "fsdp-eks:job.checkpointEvery: 243 or more or fsdp-eks:storage.fsxThroughputPerTiB: 1000" in warning
    assert checkpoint_wait_warning(SEVEN_B, 1.14, 243) is None


def test_the_warning_leaves_out_a_throughput_that_would_not_be_enough() -> None:
    warning = checkpoint_wait_warning(SEVEN_B, 0.58, 10)  # 5.8 s between saves: no FSx tier writes 75 GiB that fast
    assert warning is not None and "fsxThroughputPerTiB" not in warning
    assert "fsdp-eks:job.checkpointEvery: 476 or more removes the wait" in warning


@pytest.mark.parametrize("stack", stack_names())
def test_no_shipped_stack_makes_training_wait_for_its_checkpoints(stack: str) -> None:
    config = load_stack_config(stack)
    assert checkpoint_warning(config) is None
    storage = (sizing_summary(config) or {}).get("storage")
    if storage is not None:
        assert storage["checkpointWaitSecondsPerHour"] == 0


@pytest.mark.program
def test_a_stack_whose_saves_queue_warns_at_preview() -> None:
    job = {**raw_stack_config("p5-16")["fsdp-eks:job"], "checkpointEvery": 100}
    run = run_program("p5-16", {"fsdp-eks:storage": None, "fsdp-eks:job": job})
    [warning] = [w for w in run.warnings() if "come faster than the file system writes one" in w]
    assert "every 100 steps of 0.50 s" in warning and "training waits 49.2 min of every hour" in warning


@pytest.mark.program
def test_the_shipped_stacks_preview_without_the_warning() -> None:
    assert not [w for w in run_program("p5-16").warnings() if "come faster than" in w]
