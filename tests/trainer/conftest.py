"""Trainer test fixtures: the uninterrupted single-process reference run every comparison starts from."""

from __future__ import annotations

import pytest

from tests.harness.trainer_runs import TINY, TrainerRun, run_trainer


@pytest.fixture(scope="session")
def reference_run(tmp_path_factory: pytest.TempPathFactory) -> TrainerRun:
    """The tiny preset trained for 6 steps in one plain process, never interrupted."""
    run = run_trainer(TINY, tmp_path_factory.mktemp("reference"))
    assert run.returncode == 0, run.output
    assert [record["step"] for record in run.metrics] == [1, 2, 3, 4, 5, 6]
    return run
