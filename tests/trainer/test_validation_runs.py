"""Validation in whole trainer runs: the held-out loss a run reports equals a single-process computation with the
exported model on the same held-out set (2 ranks, and 1 under LoRA), the held-out records never reach the training
samples, --keep-best keeps and exports the best checkpoint, --early-stop-patience ends the run cleanly, and a resumed
run carries on with the best so far."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.nn.functional import cross_entropy

from tests.harness.trainer_runs import TINY, TrainerRun, run_trainer, with_flags
from trainer.base.flags.config import parse_args
from trainer.base.model.source import resolve_model
from trainer.checkpoint.export import PROVENANCE_FILE
from trainer.checkpoint.layout import complete_checkpoints, read_meta
from trainer.data.packed import IGNORE_INDEX, PackedData
from trainer.data.tokenizer_bytes import ByteTokenizer
from trainer.train import load_data

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

# 1% of the synthetic data set's records: about a hundred held-out sequences of 32 tokens.
HELD_OUT = ["--val-split", "0.01"]


def held_out_set(args: list[str]) -> PackedData:
    """The held-out stream of a run with these flags, as train.py loads it."""
    config = parse_args(args)
    val = load_data(config, resolve_model(config.model.name))[1].val
    assert val is not None
    return val


@torch.no_grad()
def exported_model_loss(export: Path, val: PackedData) -> float:
    """The mean held-out loss of the exported model in transformers, one process, one forward per sample."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(export).eval()
    total, counted = 0.0, 0
    for index in range(val.num_samples):
        inputs, labels, positions = (torch.from_numpy(array)[None] for array in val.sample(index))
        # transformers finds the packed records from the positions (find_packed_sequence_indices), without a cache
        logits = model(input_ids=inputs, position_ids=positions, use_cache=False).logits.float()
        total += float(
            cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX, reduction="sum")
        )
        counted += int((labels != IGNORE_INDEX).sum())
    return total / counted


def evaluations(run: TrainerRun) -> dict[int, float]:
    return {record["step"]: record["val_loss"] for record in run.metrics if record["val_loss"] is not None}


def early_stop_flags(base: list[str], tmp_path: Path, **flags: str) -> list[str]:
    """A learning rate high enough that the held-out loss turns up within a few of the 40 steps, an evaluation every
    step and patience 1, one checkpoint kept beside the best: a run that stops early."""
    return with_flags(
        base,
        steps="40",
        lr="0.02",
        lr_schedule="constant",
        eval_every="1",
        early_stop_patience="1",
        checkpoint_dir=str(tmp_path / "ckpt"),
        keep_checkpoints="1",
        **flags,
    )


def test_two_ranks_stop_early_keep_the_best_checkpoint_and_export_it(tmp_path: Path) -> None:
    """A learning rate high enough that the held-out loss turns up within a few steps; patience 1."""
    export = tmp_path / "export"
    args = early_stop_flags([*TINY, *HELD_OUT, "--keep-best"], tmp_path, export_hf=str(export), export_dtype="fp32")
    run = run_trainer(args, tmp_path, nproc=2)
    assert run.returncode == 0, run.output

    losses = evaluations(run)
    stop = max(losses)
    best_step = min(losses, key=losses.__getitem__)
    assert stop < 40 and "early stop" in run.output
    assert losses[stop] >= losses[best_step] and stop == best_step + 1  # one evaluation without improvement
    last = run.metrics[-1]
    assert (last["step"], last["best_val_step"], last["best_val_loss"]) == (stop, best_step, losses[best_step])
    assert last["val_perplexity"] == pytest.approx(np.exp(losses[stop]))

    # Retention kept the newest checkpoint and the best one; the best is what was exported, and says so.
    checkpoints = complete_checkpoints(tmp_path / "ckpt")
    assert [step for step, _ in checkpoints] == [best_step, stop]
    meta = read_meta(checkpoints[-1][1])["validation"]
    assert (meta["best_step"], meta["stopped_early"]) == (best_step, True)
    provenance = json.loads((export / PROVENANCE_FILE).read_text())
    assert (provenance["step"], provenance["last_step"], provenance["stopped_early"]) == (best_step, stop, True)
    assert f"the best evaluation's weights, step {best_step}" in run.output

    # The exported weights, evaluated in one plain process, give the best evaluation's loss.
    assert exported_model_loss(export, held_out_set(args)) == pytest.approx(losses[best_step], rel=1e-5)

    # Started again (a pod restarted after the stop, on one rank now), it trains no further and exports the best.
    (export / PROVENANCE_FILE).unlink()
    again = run_trainer(args, tmp_path)
    assert again.returncode == 0, again.output
    assert again.metrics == [] and "nothing left to train" in again.output
    assert json.loads((export / PROVENANCE_FILE).read_text())["step"] == best_step


def test_a_resumed_lora_run_carries_on_with_the_best_so_far(tmp_path: Path) -> None:
    """Under LoRA (adapter-only checkpoints, the merged model exported) as under full fine-tuning above."""
    export = tmp_path / "export"
    args = with_flags(
        [*TINY, *HELD_OUT], lora_rank="4", eval_every="2", checkpoint_every="2", checkpoint_dir=str(tmp_path / "ckpt")
    )
    first = run_trainer(with_flags(args, steps="4"), tmp_path)
    assert first.returncode == 0, first.output
    assert "LoRA rank 4" in first.output and sorted(evaluations(first)) == [2, 4]
    best: dict[str, Any] = {key: first.metrics[-1][key] for key in ("best_val_loss", "best_val_step")}

    resumed = run_trainer(with_flags(args, export_hf=str(export), export_dtype="fp32"), tmp_path)
    assert resumed.returncode == 0, resumed.output
    assert "resumed from" in resumed.output
    step_5, step_6 = resumed.metrics
    assert step_5["step"] == 5 and step_5["val_loss"] is None
    assert {key: step_5[key] for key in best} == best  # before its own first evaluation
    assert sorted(evaluations(resumed)) == [6]
    all_losses = evaluations(first) | evaluations(resumed)
    assert step_6["best_val_step"] == min(all_losses, key=all_losses.__getitem__)

    # One rank: the reported loss is the exported (last step's, merged) model's in one plain process.
    assert exported_model_loss(export, held_out_set(args)) == pytest.approx(step_6["val_loss"], rel=1e-5)


def test_the_held_out_records_never_reach_the_training_samples(tmp_path: Path) -> None:
    """Records that name themselves: which ones each stream's packed samples hold, decoded from the byte tokens."""
    records = [{"text": f"<record {index:04d}> " + "the quick brown fox. " * (index % 4 + 1)} for index in range(400)]
    dataset = tmp_path / "records.jsonl"
    dataset.write_text("".join(json.dumps(record) + "\n" for record in records))
    config = parse_args(["--model", "tiny", "--dataset", str(dataset), "--seq-len", "32", "--val-split", "0.2"])
    tokenizer, splits = load_data(config, resolve_model("tiny"))
    assert isinstance(tokenizer, ByteTokenizer) and splits.val is not None

    def named(data: PackedData) -> set[int]:
        text = tokenizer.decode([int(token) for index in range(data.num_samples) for token in data.sample(index)[0]])
        return {int(number) for number in re.findall(r"<record (\d{4})>", text)}

    train, val = named(splits.train), named(splits.val)
    assert not train & val
    assert train | val == set(range(400))  # every record in a block of its stream
    assert 40 <= len(val) <= 120  # about a fifth
