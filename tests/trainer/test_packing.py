"""Packing records apart (trainer/data/blocks.py, packed.py, trainer/model/attention.py): each packed record is
trained exactly as transformers' own forward on that record alone, for every model family, whichever records share
its block; long records are cut only where no prompt is lost."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
import torch
from torch.nn.functional import cross_entropy

from tests.trainer.test_model_families import FAMILIES, random_tiny
from trainer.data.blocks import best_fit_decreasing, pack_blocks
from trainer.data.packed import IGNORE_INDEX, PackedData, stack
from trainer.data.packing import pack
from trainer.data.tokenizer_bytes import ByteTokenizer
from trainer.model.attention import attention_forward, block_mask, boolean_mask, document_inputs
from trainer.model.build import build_meta_model, init_buffers

SEQ_LEN = 160  # positions restart at each record: beyond the tiny models' 128 positions is fine


def records(count: int, seed: int) -> list[dict[str, str]]:
    """Instruction records of about 40 to 100 tokens (the template's prompt is 36 bytes), a third of them with an
    input block: each with a masked prompt."""
    rng = random.Random(seed)
    words = ["add", "two", "and", "three", "the", "sum", "is", "five", "ok", "x"]

    def text(low: int, high: int) -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randint(low, high)))

    return [
        {"instruction": text(1, 6), "input": text(1, 3) if rng.random() < 0.3 else "", "output": text(1, 4)}
        for _ in range(count)
    ]


def models(model_type: str) -> tuple[torch.nn.Module, torch.nn.Module]:
    """transformers' own model of the family (its default SDPA attention), random weights, biases and norm weights
    moved off their initial values; and the trainer's model of the same config built as the trainer builds it
    (meta device, to_empty, buffers), holding the same weights."""
    from transformers import AutoConfig

    reference = random_tiny(model_type, seed=11)
    ours = build_meta_model(AutoConfig.for_model(model_type, **FAMILIES[model_type]))
    ours.to_empty(device="cpu")
    init_buffers(ours, torch.device("cpu"))
    ours.load_state_dict(reference.state_dict())
    return reference.eval(), ours.eval()


@torch.no_grad()
def packed_token_losses(model: torch.nn.Module, data: PackedData) -> dict[int, torch.Tensor]:
    """Stream position of each learnt token -> its loss, from forwards over the packed blocks."""
    batch = stack([data.sample(index) for index in range(data.num_samples)])
    inputs, labels, positions = (torch.from_numpy(array) for array in batch)
    logits = model(input_ids=inputs, **document_inputs(positions)).logits.float()
    losses = cross_entropy(logits.transpose(1, 2), labels, ignore_index=IGNORE_INDEX, reduction="none")
    found: dict[int, torch.Tensor] = {}
    blocks = data.blocks
    for block in range(blocks.count):
        offset = 0
        for segment in range(int(blocks.bounds[block]), int(blocks.bounds[block + 1])):
            start, length = int(blocks.starts[segment]), int(blocks.lengths[segment])
            for j in range(length):
                if labels[block, offset + j] != IGNORE_INDEX:
                    found[start + j + 1] = losses[block, offset + j]
            offset += length
    return found


@torch.no_grad()
def alone_token_losses(model: torch.nn.Module, data: PackedData) -> dict[int, torch.Tensor]:
    """The same, from a forward of each record alone (no positions, no mask: the model's own causal attention)."""
    found: dict[int, torch.Tensor] = {}
    start = 0
    for length in data.record_lengths.tolist():
        ids = torch.from_numpy(data.tokens[start : start + length].astype(np.int64))[None]
        logits = model(input_ids=ids[:, :-1]).logits.float()[0]
        losses = cross_entropy(logits, ids[0, 1:], reduction="none")
        for j in range(length - 1):
            if data.trainable[start + j + 1]:
                found[start + j + 1] = losses[j]
        start += length
    return found


@pytest.mark.parametrize("model_type", FAMILIES)
def test_each_packed_records_token_losses_are_transformers_own_on_that_record_alone(model_type: str) -> None:
    reference, ours = models(model_type)
    data = pack(records(12, seed=1), ByteTokenizer(), "instruction", SEQ_LEN)
    assert data.num_samples < len(data.record_lengths)  # blocks hold several records
    packed, alone = packed_token_losses(ours, data), alone_token_losses(reference, data)
    assert packed.keys() == alone.keys() and len(packed) > 100
    assert max(float((packed[t] - alone[t]).abs()) for t in packed) < 1e-5


def test_the_loss_does_not_depend_on_which_records_share_a_block() -> None:
    """The same records in another order and another block length share blocks with other records: every token's
    loss, and so the step's loss, is the same."""
    _, ours = models("llama")
    rows = records(16, seed=2)
    first = pack(rows, ByteTokenizer(), "instruction", SEQ_LEN)
    shuffled = list(reversed(rows))
    second = pack(shuffled, ByteTokenizer(), "instruction", 2 * SEQ_LEN)
    neighbours = [set(map(tuple, block_records(data))) for data in (first, second)]
    assert neighbours[0] != neighbours[1]
    losses_first, losses_second = packed_token_losses(ours, first), packed_token_losses(ours, second)
    by_record_first = record_losses(first, losses_first, rows)
    by_record_second = record_losses(second, losses_second, shuffled)
    for key, value in by_record_first.items():
        assert by_record_second[key] == pytest.approx(value, abs=1e-5)
    total = sum(by_record_first.values()) / len(losses_first)
    assert sum(by_record_second.values()) / len(losses_second) == pytest.approx(total, rel=1e-6)


def block_records(data: PackedData) -> list[list[int]]:
    """The stream start of each segment, block by block."""
    blocks = data.blocks
    return [blocks.starts[blocks.bounds[b] : blocks.bounds[b + 1]].tolist() for b in range(blocks.count)]


def record_losses(data: PackedData, losses: dict[int, torch.Tensor], rows: list[dict[str, Any]]) -> dict[str, float]:
    """Each record's summed token loss, keyed by its content."""
    ends = np.cumsum(data.record_lengths)
    summed: dict[str, float] = {}
    for position, loss in losses.items():
        record = int(np.searchsorted(ends, position, side="right"))
        key = repr(sorted(rows[record].items()))
        summed[key] = summed.get(key, 0.0) + float(loss)
    return summed


def test_a_long_text_record_is_cut_into_pieces_and_a_prompted_one_keeps_its_first_block() -> None:
    text = pack([{"text": "a" * 150}], ByteTokenizer(), "text", 64)  # 152 tokens: 151 predictions
    assert text.blocks.lengths.tolist() == [64, 64, 23] and text.blocks.truncated == 0
    assert text.blocks.starts.tolist() == [0, 64, 128]
    assert [text.sample(i).positions[0] for i in range(3)] == [0, 0, 0]
    prompted = pack([{"instruction": "b" * 100, "output": "c" * 40}], ByteTokenizer(), "instruction", 64)
    assert prompted.blocks.lengths.tolist() == [64] and prompted.blocks.truncated == 1  # no piece without its prompt


def test_blocks_are_filled_tightly_and_every_record_is_placed_once() -> None:
    rng = np.random.default_rng(0)
    lengths = rng.integers(2, 300, 5000)
    trainable = np.ones(int(lengths.sum()), dtype=bool)
    blocks = pack_blocks(lengths, trainable, 512)
    assert sorted(blocks.starts.tolist()) == np.concatenate([[0], np.cumsum(lengths)[:-1]]).tolist()
    per_block = np.add.reduceat(blocks.lengths, blocks.bounds[:-1])
    assert per_block.max() <= 512
    assert blocks.filled() / (512 * blocks.count) > 0.99
    assert best_fit_decreasing(np.array([5, 3, 2, 4, 1]), 6).tolist() == [0, 2, 1, 1, 0]  # 5+1, 4+2, 3 alone


@torch.no_grad()
def test_the_flex_block_mask_attends_as_the_boolean_mask() -> None:
    """The CUDA path's BlockMask (checked here in eager flex attention, forward only: CPU has no flex backward)
    against the CPU path's boolean mask, grouped-query heads included."""
    torch.manual_seed(0)
    positions = torch.tensor([[*range(100), *range(90), *range(66)], [*range(256)]])
    query, key, value = torch.randn(2, 4, 256, 16), torch.randn(2, 2, 256, 16), torch.randn(2, 2, 256, 16)
    module = torch.nn.Module()
    sdpa, _ = attention_forward(module, query, key, value, boolean_mask(positions), scaling=0.25)
    flex, _ = attention_forward(module, query, key, value, block_mask(positions, compiled=False), scaling=0.25)
    assert (flex - sdpa).abs().max() < 1e-5
    causal, _ = attention_forward(module, query, key, value, None, scaling=0.25)
    assert torch.allclose(sdpa[1], causal[1], atol=1e-6)  # one record: causal attention
    assert not torch.allclose(sdpa[0], causal[0], atol=1e-3)
