"""The trainer on the software of the GPU machine it may be lent (tests/harness/floor.py): torch's API as of the floor
in requirements-trainer.txt, without the optional packages, without a network. Two ranks there train as one rank
does here, with the vocabulary-rows embedding, the fabric preflight, checkpoints and the export."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from stack.paths import PROJECT_ROOT
from tests.harness.floor import MISSING_PACKAGES, POST_FLOOR_TORCH, TORCH_FLOOR, floor_env
from tests.harness.trainer_runs import TINY, TrainerRun, assert_same_losses, run_trainer, with_flags
from trainer.base.model.presets import PRESETS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

PROBE = """
import importlib, importlib.util, socket
for module, attribute in POST_FLOOR:
    assert not hasattr(importlib.import_module(module), attribute), (module, attribute)
for name in MISSING:
    assert importlib.util.find_spec(name) is None, name
    try:
        importlib.import_module(name)
    except ModuleNotFoundError:
        pass
    else:
        raise AssertionError(name)
try:
    socket.create_connection(("198.51.100.7", 443), timeout=2)
except OSError as error:
    assert "Network is unreachable" in str(error), error
else:
    raise AssertionError("reached the network")
# Everything the trainer imports to train, checkpoint (to S3 too) and export loads without the optional packages.
import trainer.main, trainer.train, trainer.checkpoint.checkpointer, trainer.checkpoint.load, trainer.checkpoint.durable
print("simulated")
"""


def test_the_floor_in_requirements_is_the_one_simulated() -> None:
    lines = (PROJECT_ROOT / "requirements-trainer.txt").read_text().splitlines()
    (torch,) = [Requirement(line) for line in lines if line.startswith("torch")]
    assert str(torch.specifier) == f">={TORCH_FLOOR}"


def test_the_simulation_takes_away_what_the_lent_machine_lacks_and_the_trainer_still_loads() -> None:
    code = f"POST_FLOOR = {POST_FLOOR_TORCH!r}\nMISSING = {MISSING_PACKAGES!r}\n{PROBE}"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=PROJECT_ROOT,
        env={**os.environ, **floor_env()},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "simulated" in done.stdout, done.stderr


def test_two_ranks_on_the_floor_train_as_one_rank_here(reference_run: TrainerRun, tmp_path: Path) -> None:
    """TINY on 2 ranks: 2 x 64 tokens in flight against 260 vocabulary rows, so the embedding is sharded by rows
    (its all-gather and reduce-scatter through the fallbacks); the preflight times the node; a checkpoint every 3
    steps; the export at the end. The losses are the single rank's, here, on torch with every API."""
    assert PRESETS["tiny"].vocab_size > 2 * 2 * 32  # embedding_by_rows: ranks x tokens per rank in flight < rows
    export = tmp_path / "export"
    args = with_flags(TINY, checkpoint_dir=str(tmp_path / "checkpoints"), checkpoint_every="3", export_hf=str(export))
    run = run_trainer(args, tmp_path, nproc=2, env=floor_env())
    assert run.returncode == 0, run.output
    assert "fabric preflight intra_all_gather bus bandwidth GB/s: node 0" in run.output
    assert sorted(path.name for path in (tmp_path / "checkpoints").iterdir()) == ["step_00000003", "step_00000006"]
    assert (export / "model.safetensors").is_file() and (export / "config.json").is_file()
    assert_same_losses(run.losses(), reference_run.losses())
