"""The held-out loss as the trainer computes it (trainer/evaluation.py), against a plain computation on the same
held-out set: the mean cross-entropy over every counted token, whatever the world size's partition and padding, for
a fully trained and a LoRA model built as train.py builds them; and the bookkeeping of the best evaluation."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest
import torch
from torch.distributed.tensor import DTensor
from torch.nn.functional import cross_entropy

from tests.harness.trainer_runs import TINY
from trainer.base.flags.config import DataConfig, ValidationConfig, parse_args
from trainer.base.flags.parallel_plan import make_plan
from trainer.base.model.source import resolve_model
from trainer.base.pod.env import DistEnv
from trainer.comms.distributed import io_group
from trainer.data.packed import IGNORE_INDEX, PackedData, stack
from trainer.evaluation import BestSoFar, Evaluation, eval_due, held_out_identity, held_out_loss, rank_rows
from trainer.model.attention import document_inputs
from trainer.model.lora import is_adapter
from trainer.parallel.parallelize import build_mesh
from trainer.train import build_model

SEQ_LEN, BATCH = 32, 2


def held_out_set(samples: int, seed: int = 0) -> PackedData:
    """Random byte-token ids with about a third of the tokens not learnt (a prompt's), as packing makes them."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(SEQ_LEN // 2 + 2, SEQ_LEN + 2, samples)  # over half a block each: a block apiece
    tokens = rng.integers(0, 256, int(lengths.sum()), dtype=np.int64)
    data = PackedData(tokens, rng.random(tokens.size) > 0.3, SEQ_LEN, lengths)
    assert data.num_samples == samples
    return data


def trainer_model(*flags: str) -> torch.nn.Module:
    """The tiny preset as train.py builds it (meta device, FSDP2 units, weights) in this process's world of one."""
    config = parse_args([*TINY, *flags])
    env, source = DistEnv(), resolve_model("tiny")
    plan = make_plan(config, env)
    mesh = build_mesh(config.parallel.sharding_strategy, plan, "cpu")
    model, _ = build_model(source, config, mesh, torch.device("cpu"), env, io_group(timedelta(minutes=1)))
    return model


@torch.no_grad()
def plain_mean_loss(model: torch.nn.Module, data: PackedData) -> float:
    """One forward of every sample together and cross-entropy's own mean over the labels that count."""
    inputs, labels, positions = (torch.from_numpy(a) for a in stack([data.sample(i) for i in range(data.num_samples)]))
    logits = model(input_ids=inputs, **document_inputs(positions)).logits.float()
    return float(cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX))


def combined(parts: list[tuple[float, int]]) -> float:
    return sum(loss * tokens for loss, tokens in parts) / sum(tokens for _, tokens in parts)


@pytest.mark.usefixtures("world_of_one")
@pytest.mark.parametrize(
    "flags",
    [("--sharding-strategy", "SHARD_GRAD_OP"), ("--lora-rank", "4", "--mixed-precision", "fp32")],
    ids=["full", "lora"],
)
def test_the_held_out_loss_is_the_mean_over_every_counted_token_for_any_partition(flags: tuple[str, ...]) -> None:
    model = trainer_model(*flags)
    if "--lora-rank" in flags:  # B starts at zero: move it, so the adapters change the loss
        for name, parameter in model.named_parameters():
            if is_adapter(name) and "lora_B" in name:
                torch.nn.init.normal_(parameter.to_local() if isinstance(parameter, DTensor) else parameter, std=0.05)
    data = held_out_set(7)  # 7 samples: with 2 rows per forward, every world size has a partial or empty share
    expected = plain_mean_loss(model, data)
    counted = int(sum((data.sample(i)[1] != IGNORE_INDEX).sum() for i in range(data.num_samples)))

    loss, tokens = held_out_loss(model, data, BATCH, 0, 1, torch.device("cpu"))
    assert tokens == counted
    assert loss == pytest.approx(expected, rel=1e-5)
    # The shares of 2 and 3 data-parallel ranks (each rank's own figures, as its all-reduce would add them up).
    for dp_size in (2, 3):
        parts = [held_out_loss(model, data, BATCH, rank, dp_size, torch.device("cpu")) for rank in range(dp_size)]
        assert sum(tokens for _, tokens in parts) == counted
        assert combined(parts) == pytest.approx(expected, rel=1e-5)
    # Training resumes as it left off: in training mode, every unit back to its shards (SHARD_GRAD_OP's too).
    assert model.training
    assert all(isinstance(parameter, DTensor) for parameter in model.parameters())


def test_every_held_out_sample_is_evaluated_once_and_every_rank_runs_the_same_forwards() -> None:
    for samples in (1, 5, 8, 9):
        for dp_size in (1, 2, 3, 4):
            shares = [list(rank_rows(samples, BATCH, rank, dp_size)) for rank in range(dp_size)]
            assert len({len(share) for share in shares}) == 1  # the same number of forwards on every rank
            rows = sorted(row for share in shares for forward in share for row in forward)
            assert rows == list(range(samples))


def test_the_best_evaluation_and_the_patience_count() -> None:
    best = BestSoFar(held_out="--val-split 0.1")
    for step, loss in ((2, 3.0), (4, 2.5), (6, 2.7), (8, math.nan)):
        best = best.after(Evaluation(step, loss, 100, 0.1))
    assert (best.loss, best.step, best.stale) == (2.5, 4, 2)  # a NaN is no improvement
    assert best.exhausted(2) and not best.exhausted(3) and not best.exhausted(0)
    assert best.after(Evaluation(10, 2.4, 100, 0.1)).stale == 0
    meta = {"validation": best.to_meta()}
    assert BestSoFar.from_meta(meta, "--val-split 0.1") == best
    assert BestSoFar.from_meta(meta, "--val-split 0.2") == BestSoFar(held_out="--val-split 0.2")  # another set
    assert BestSoFar.from_meta(None, "--val-split 0.1") == BestSoFar(held_out="--val-split 0.1")


def test_a_nan_first_evaluation_is_not_the_best_and_a_later_finite_one_is() -> None:
    best = BestSoFar().after(Evaluation(2, math.nan, 0, 0.1))
    assert (best.loss, best.step, best.stale) == (None, None, 1)
    best = best.after(Evaluation(4, 3.0, 100, 0.1))
    assert (best.loss, best.step, best.stale) == (3.0, 4, 0)


def test_a_held_out_set_is_named_by_the_data_set_it_is_drawn_from() -> None:
    """A resume with another --dataset (or format, or hub split) but the same --val-split evaluates other records:
    its best loss starts afresh (BestSoFar.from_meta compares these names)."""
    data, split = DataConfig(dataset="a.jsonl"), ValidationConfig(split=0.1)
    names = {
        held_out_identity(data, split),
        held_out_identity(replace(data, dataset="b.jsonl"), split),
        held_out_identity(replace(data, dataset_format="chat"), split),
        held_out_identity(replace(data, dataset_split="test"), split),
        held_out_identity(data, ValidationConfig(split=0.2)),
        held_out_identity(data, ValidationConfig(dataset="v.jsonl")),
        held_out_identity(data, ValidationConfig(dataset="v.jsonl", dataset_split="validation")),
    }
    assert len(names) == 7
    # --val-dataset's records do not depend on --dataset
    val = ValidationConfig(dataset="v.jsonl")
    assert held_out_identity(data, val) == held_out_identity(replace(data, dataset="b.jsonl"), val)
    meta = {"validation": BestSoFar(2.5, 4, held_out=held_out_identity(data, split)).to_meta()}
    other = held_out_identity(replace(data, dataset="b.jsonl"), split)
    assert BestSoFar.from_meta(meta, other) == BestSoFar(held_out=other)


def test_the_early_stop_line_names_the_best_loss_or_that_there_is_none() -> None:
    best = BestSoFar().after(Evaluation(2, 3.0, 100, 0.1)).after(Evaluation(4, 3.5, 100, 0.1))
    assert best.early_stop_line(4, 1) == (
        "step 4: early stop, 1 evaluations without a val loss below 3.0000 (step 2): --early-stop-patience 1"
    )
    all_nan = BestSoFar().after(Evaluation(2, math.nan, 0, 0.1)).after(Evaluation(4, math.nan, 0, 0.1))
    assert all_nan.early_stop_line(4, 2) == (
        "step 4: early stop, 2 evaluations with no finite val loss yet: --early-stop-patience 2"
    )


def test_evaluations_come_every_n_steps_and_at_the_last() -> None:
    assert [step for step in range(1, 11) if eval_due(step, 10, 4)] == [4, 8, 10]
    assert [step for step in range(1, 11) if eval_due(step, 10, 0)] == [10]
