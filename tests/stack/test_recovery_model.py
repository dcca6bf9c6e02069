"""The model of a crashed rank's cost in time (stack/recovery.py): its phases are the local drill's, each figure says
where it comes from, and docs/job.md quotes what it gives for p5-16."""

from __future__ import annotations

import re

from stack.files import load_stack_config
from stack.paths import PROJECT_ROOT
from stack.recovery import crash_recovery, preflight_seconds, steps_lost_s
from trainer.base.flags.config import PreflightConfig
from trainer.base.pod.shutdown import MAIN_THREAD_GRACE_S


def test_blocked_workers_cost_the_watchers_grace_on_each_side_not_torchruns_30_s() -> None:
    phases = crash_recovery(load_stack_config("p5-16"))
    stops = [phase.seconds for phase in phases if "stop" in phase.name]
    assert stops == [MAIN_THREAD_GRACE_S, MAIN_THREAD_GRACE_S]


def test_every_phase_names_its_basis_and_the_unmeasured_ones_say_assumed() -> None:
    phases = crash_recovery(load_stack_config("p5-16"))
    assert all(phase.basis for phase in phases)
    assert {phase.name for phase in phases if phase.basis == "assumed"} == {
        "the workers start: imports, CUDA, NCCL",
        "model build",
        "compile (warm cache)",
    }


def test_the_checkpoint_read_is_the_sizing_models_load_time() -> None:
    phases = {phase.name: phase for phase in crash_recovery(load_stack_config("p5-16"))}
    assert 30 < phases["checkpoint read"].seconds < 300  # 75 GiB at the stack's 1200 GiB x 1000 MB/s/TiB


def test_the_preflight_takes_longer_with_more_nodes_and_nothing_when_off() -> None:
    config = PreflightConfig()
    assert preflight_seconds(config, 16, 300.0, 40.0) > preflight_seconds(config, 2, 300.0, 40.0) > 0
    assert preflight_seconds(PreflightConfig(mode="off"), 16, 300.0, 40.0) == 0


def test_docs_job_md_quotes_the_models_p5_16_figures() -> None:
    config = load_stack_config("p5-16")
    total = round(sum(phase.seconds for phase in crash_recovery(config)))
    text = (PROJECT_ROOT / "docs" / "job.md").read_text()
    text = " ".join(text.split())  # the paragraph wraps where it will
    quoted = re.search(r"[Mm]odelled for p5-16: about (\d+) s to the first step, plus up to (\d+) s", text)
    assert quoted is not None, "docs/job.md no longer quotes the model"
    assert (int(quoted.group(1)), int(quoted.group(2))) == (total, round(steps_lost_s(config)))
    assert f"| **{total} s** |" in text  # the phase table's total
