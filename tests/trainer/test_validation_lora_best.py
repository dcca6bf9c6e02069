"""--keep-best under LoRA: the adapter-only checkpoint of the best evaluation, loaded back into the model and merged,
is what --export-hf exports (the best is not the last step's, so a load that left the last adapters in place fails)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness.trainer_runs import TINY, run_trainer, with_flags
from tests.trainer.test_validation_runs import HELD_OUT, evaluations, exported_model_loss, held_out_set
from trainer.checkpoint.export import PROVENANCE_FILE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_a_lora_run_exports_its_best_evaluations_merged_weights(tmp_path: Path) -> None:
    export = tmp_path / "export"
    args = with_flags(
        [*TINY, *HELD_OUT, "--keep-best"],
        steps="12",
        lr="0.05",  # high enough that the last evaluation is not the best (seed 7: the best is step 11)
        lr_schedule="constant",
        lora_rank="4",
        eval_every="1",
        checkpoint_dir=str(tmp_path / "ckpt"),
        keep_checkpoints="1",
        export_hf=str(export),
        export_dtype="fp32",
    )
    run = run_trainer(args, tmp_path)
    assert run.returncode == 0, run.output
    losses = evaluations(run)
    best = min(losses, key=losses.__getitem__)
    assert best != max(losses), losses  # else this test shows nothing: change the seed or the rate
    assert json.loads((export / PROVENANCE_FILE).read_text())["step"] == best
    assert exported_model_loss(export, held_out_set(args)) == pytest.approx(losses[best], rel=1e-5)
