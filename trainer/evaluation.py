"""Validation while fine-tuning: the held-out loss and perplexity, the best evaluation so far, early stop.

Every rank evaluates its share of the held-out packed samples (--val-split's records or --val-dataset, packed as
training packs, trainer/data/packing.py) with the model exactly as it trains: the same FSDP2 units, compile, LoRA
adapters and mixed precision, forward only under torch.no_grad. FSDP2 all-gathers each unit's parameters in every
forward, a collective, so every rank runs the same number of forwards of the same shape (the vocabulary-sharded
embedding all-gathers the token ids of every rank, trainer/parallel/embedding.py, which needs equal shapes too): a
rank whose share runs out fills its rows with padding whose labels are all IGNORE_INDEX, which no loss counts.

The loss is the exact global mean over the held-out tokens that count, as in training: the sum of the per-token
losses and the count of those tokens, each summed over the ranks. Which samples a rank reads depends on the world
size; which samples are evaluated, and so the figure, does not. No cap: the whole held-out set every evaluation (its
size is the user's choice, --val-split, and the stack's sizing counts its time).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, Self

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import FSDPModule

from trainer.base.flags.config import DataConfig, ValidationConfig
from trainer.data.packed import IGNORE_INDEX, PackedData, Sample, stack
from trainer.model.attention import document_inputs
from trainer.model.loss import labels_for_loss

log = logging.getLogger(__name__)

VALIDATION_META = "validation"
"""meta.json's key for the best evaluation so far (trainer/checkpoint/layout.py): a resumed run carries on with it."""


def summed_token_loss(
    model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, positions: torch.Tensor
) -> torch.Tensor:
    """The sum of the per-token cross-entropy over the tokens that count (labels not IGNORE_INDEX): the one loss of
    training (trainer/train.py train_step) and of evaluation. Each packed record is seen alone: its positions restart
    at 0 and its attention stays within it (trainer/model/attention.py). The output layer computes the loss chunk by
    chunk of tokens, never holding the logits of every token (trainer/model/loss.py), and returns it as the model's
    `logits`."""
    with labels_for_loss(model, targets):
        return model(input_ids=inputs, **document_inputs(positions)).logits


def evaluation_rounds(num_samples: int, batch_size: int, dp_size: int) -> int:
    """Forwards every rank runs: enough rounds of `batch_size` rows on each of `dp_size` ranks for every sample."""
    return -(-num_samples // (batch_size * dp_size))


def rank_rows(num_samples: int, batch_size: int, dp_rank: int, dp_size: int) -> Iterator[list[int]]:
    """The held-out sample ids of each of this rank's forwards, in order, as training lays out a global batch
    (trainer/data/packing.py step_batch): round f on rank r takes samples [(f * dp + r) * b, (f * dp + r + 1) * b),
    clipped to the set. Every sample once over all ranks; a rank past the end gets fewer rows, or none."""
    for round_index in range(evaluation_rounds(num_samples, batch_size, dp_size)):
        start = (round_index * dp_size + dp_rank) * batch_size
        yield list(range(min(start, num_samples), min(start + batch_size, num_samples)))


def batch_of(data: PackedData, rows: list[int], batch_size: int) -> Sample:
    """Inputs, labels and positions [batch_size, seq_len] of these samples, the missing rows padding: sample 0's
    inputs and positions (any valid ones do) with every label IGNORE_INDEX, so no loss and no count comes from them."""
    first = data.sample(0)
    padding = first._replace(labels=np.full_like(first.labels, IGNORE_INDEX))
    return stack([data.sample(row) for row in rows] + [padding] * (batch_size - len(rows)))


@dataclass(frozen=True)
class Evaluation:
    step: int
    loss: float
    """Mean cross-entropy per counted token over the whole held-out set."""
    tokens: int
    """Held-out tokens counted (all ranks)."""
    seconds: float

    @property
    def perplexity(self) -> float:
        return perplexity(self.loss)


def perplexity(loss: float) -> float:
    """exp(loss), infinite where a float would overflow (past ~709.8)."""
    return math.exp(loss) if loss < 700 else math.inf


def reshard(model: nn.Module) -> None:
    """Every FSDP unit back to its shards. After a forward without backward the units that keep their parameters
    gathered until the backward (the root and the output layer, all of them under SHARD_GRAD_OP: reshard_after_forward
    False) would hold them until the next training step's backward: torch's FSDPParamGroup.post_forward reshards only
    those with reshard_after_forward (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py)."""
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()


@torch.no_grad()
def held_out_loss(
    model: nn.Module, data: PackedData, batch_size: int, dp_rank: int, dp_size: int, device: torch.device
) -> tuple[float, int]:
    """(mean loss, counted tokens) over every sample of `data`, all ranks together (a collective: every rank calls
    it). torch.no_grad, not inference_mode: FSDP2 reuses the gathered parameters' storage in training, where inference
    tensors could not be saved for backward."""
    was_training = model.training
    model.eval()  # no dropout (the Llama family's attention_dropout; 0 by default, but a config may set it)
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    counted = 0
    try:
        for rows in rank_rows(data.num_samples, batch_size, dp_rank, dp_size):
            batch = batch_of(data, rows, batch_size)
            counted += int((batch.labels != IGNORE_INDEX).sum())
            inputs, targets, positions = (torch.from_numpy(array).to(device) for array in batch)
            loss_sum += summed_token_loss(model, inputs, targets, positions).double()
    finally:
        model.train(was_training)
        reshard(model)
    totals = torch.stack([loss_sum, torch.tensor(float(counted), dtype=torch.float64, device=device)])
    dist.all_reduce(totals)
    # Rank 0's figures to all: the best-so-far and the early stop follow from them, and must be the same decision on
    # every rank; an all-reduce's result is not promised bit-identical across ranks by every backend.
    dist.broadcast(totals, src=0)
    loss_total, tokens = (float(value) for value in totals.tolist())
    return (loss_total / tokens if tokens else math.nan), int(tokens)


@dataclass(frozen=True)
class BestSoFar:
    """The lowest held-out loss so far and its step, and the evaluations since then without a lower one: what
    --keep-best and --early-stop-patience act on, written into each checkpoint's meta.json so a resumed run carries on
    with it."""

    loss: float | None = None
    step: int | None = None
    stale: int = 0
    """Evaluations since the best one, none lower."""
    stopped: bool = False
    """Training ended here by --early-stop-patience: a run resumed from this checkpoint trains no further."""
    held_out: str = ""
    """Which held-out set the losses are of (held_out_identity): a resumed run with another starts afresh."""

    def after(self, evaluation: Evaluation) -> Self:
        """The record after one more evaluation. A loss not lower (a NaN included) is no improvement; a NaN is never
        the best, also as the first evaluation (no later loss compares below a NaN, so it would stay best for good)."""
        if not math.isnan(evaluation.loss) and (self.loss is None or evaluation.loss < self.loss):
            return replace(self, loss=evaluation.loss, step=evaluation.step, stale=0)
        return replace(self, stale=self.stale + 1)

    def exhausted(self, patience: int) -> bool:
        """Whether --early-stop-patience `patience` ends training now (0: never)."""
        return patience > 0 and self.stale >= patience

    def early_stop_line(self, step: int, patience: int) -> str:
        """The log line of an early stop at `step`. Every evaluation NaN leaves no best loss to name (formatting None
        as a number made logging print a traceback in place of the line)."""
        since = (
            f"without a val loss below {self.loss:.4f} (step {self.step})"
            if self.loss is not None and self.step is not None
            else "with no finite val loss yet"
        )
        return f"step {step}: early stop, {self.stale} evaluations {since}: --early-stop-patience {patience}"

    def to_meta(self) -> dict[str, Any]:
        return {
            "best_loss": self.loss,
            "best_step": self.step,
            "evaluations_without_improvement": self.stale,
            "stopped_early": self.stopped,
            "held_out": self.held_out,
        }

    @classmethod
    def from_meta(cls, meta: dict[str, Any] | None, held_out: str) -> Self:
        """The record a checkpoint's meta.json holds, if it is of the same held-out set; else a fresh one."""
        saved = (meta or {}).get(VALIDATION_META)
        if not saved:
            return cls(held_out=held_out)
        if saved.get("held_out") != held_out:
            log.warning(
                "validation: the checkpoint's best loss is of another held-out set (%s, now %s): starting afresh",
                saved.get("held_out"),
                held_out,
            )
            return cls(held_out=held_out)
        return cls(
            saved["best_loss"],
            saved["best_step"],
            int(saved["evaluations_without_improvement"]),
            bool(saved["stopped_early"]),
            held_out,
        )


def held_out_identity(data: DataConfig, validation: ValidationConfig) -> str:
    """What names the held-out set, for BestSoFar.held_out: losses of different sets are not comparable. The data
    set it is drawn from counts (--val-split's fraction of another --dataset is other records), with its hub config,
    split and record format (a format renders other tokens to predict)."""
    if validation.dataset:
        source, split = f"--val-dataset {validation.dataset}", validation.split_read(data.dataset_split)
    else:
        source, split = f"--val-split {validation.split:g} of --dataset {data.dataset}", data.dataset_split
    config = f", --dataset-config {data.dataset_config}" if data.dataset_config else ""
    return f"{source} (split {split}{config}, --dataset-format {data.dataset_format})"


def eval_due(step: int, last_step: int, every: int) -> bool:
    """--eval-every's steps, and always the last one."""
    return step == last_step or (every > 0 and step % every == 0)


class Validator:
    """The held-out set and its evaluations on this rank."""

    def __init__(self, data: PackedData, batch_size: int, dp_rank: int, dp_size: int, device: torch.device) -> None:
        self.data, self.batch_size, self.dp_rank, self.dp_size, self.device = data, batch_size, dp_rank, dp_size, device

    def evaluate(self, model: nn.Module, step: int) -> Evaluation:
        started = time.perf_counter()
        loss, tokens = held_out_loss(model, self.data, self.batch_size, self.dp_rank, self.dp_size, self.device)
        evaluation = Evaluation(step, loss, tokens, time.perf_counter() - started)
        log.info(
            "step %d: val loss %.4f (ppl %.2f) over %d held-out sequences (%d tokens) in %.2fs",
            step,
            evaluation.loss,
            evaluation.perplexity,
            self.data.num_samples,
            tokens,
            evaluation.seconds,
        )
        return evaluation
