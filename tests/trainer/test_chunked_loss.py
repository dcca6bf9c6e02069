"""The chunked loss (trainer/model/loss.py): cross-entropy over the vocabulary, IGNORE_INDEX labels skipped, the same
loss and gradients as the plain loss, and exactly the memory sizing/memory.py's loss_bytes counts, measured by torch's
own allocator records."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
import torch
from torch.nn.functional import cross_entropy
from torch.profiler import ProfilerActivity, profile

from sizing.memory import loss_bytes
from trainer.base.model import loss_chunks
from trainer.base.model.presets import PRESETS
from trainer.base.model.source import resolve_model
from trainer.data.packed import IGNORE_INDEX
from trainer.dtypes import TORCH_DTYPES
from trainer.evaluation import summed_token_loss
from trainer.model.build import build_meta_model, hf_config, init_buffers, init_weights
from trainer.model.loss import ChunkedLossHead, chunked_cross_entropy, labels_for_loss, use_chunked_loss

CHUNK = 16
TOKENS, HIDDEN, VOCAB = 3 * CHUNK + 5, 24, 300  # three whole chunks and a remainder


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loss_chunks, "CHUNK_TOKENS", CHUNK)


def labels(generator: torch.Generator) -> torch.Tensor:
    """Random classes; a few ignored tokens, and the whole second chunk ignored (a chunk that counts for nothing)."""
    found = torch.randint(0, VOCAB, (TOKENS,), generator=generator)
    found[[0, 7, TOKENS - 1]] = IGNORE_INDEX
    found[CHUNK : 2 * CHUNK] = IGNORE_INDEX
    return found


def inputs(dtype: torch.dtype, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    hidden = torch.randn(TOKENS, HIDDEN, generator=generator).to(dtype)
    weight = (torch.randn(VOCAB, HIDDEN, generator=generator) / HIDDEN**0.5).to(dtype)
    return hidden, weight, labels(generator)


def plain(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The loss the trainer computed before: the logits in the compute dtype, then fp32 cross-entropy."""
    return cross_entropy((hidden @ weight.t()).float(), targets, ignore_index=IGNORE_INDEX, reduction="sum")


def loss_and_grads(loss: Callable[..., torch.Tensor], dtype: torch.dtype, scale: float) -> list[torch.Tensor]:
    hidden, weight, targets = inputs(dtype)
    hidden.requires_grad_()
    weight.requires_grad_()
    value = loss(hidden, weight, targets)
    (value * scale).backward()  # as a training step divides by the global batch's tokens
    assert hidden.grad is not None and weight.grad is not None
    assert hidden.grad.dtype == weight.grad.dtype == dtype
    return [value.detach(), hidden.grad, weight.grad]


@pytest.mark.parametrize(("dtype", "tolerance"), [("fp32", 1e-5), ("bf16", 2e-2), ("fp16", 2e-3)])
def test_the_loss_and_its_gradients_are_the_plain_cross_entropys(dtype: str, tolerance: float) -> None:
    """fp32 to rounding; in bf16 and fp16 the gradients are rounded to the compute dtype per chunk instead of once."""
    chunked = loss_and_grads(chunked_cross_entropy, TORCH_DTYPES[dtype], scale=1 / 37)
    reference = loss_and_grads(plain, TORCH_DTYPES[dtype], scale=1 / 37)
    for mine, theirs in zip(chunked, reference, strict=True):
        scale = float(theirs.abs().max())
        torch.testing.assert_close(mine.float(), theirs.float(), rtol=tolerance, atol=tolerance * scale)


def test_ignored_tokens_count_for_nothing() -> None:
    hidden, weight, targets = inputs(torch.float32)
    hidden.requires_grad_()
    counted = targets != IGNORE_INDEX
    total = chunked_cross_entropy(hidden, weight, targets)
    total.backward()
    assert hidden.grad is not None and not hidden.grad[~counted].any() and hidden.grad[counted].abs().sum(1).all()
    only_counted = chunked_cross_entropy(hidden[counted], weight, targets[counted])
    torch.testing.assert_close(total, only_counted)


def test_a_frozen_output_layer_gets_no_gradient_and_evaluation_only_the_loss() -> None:
    """LoRA freezes the output layer: only the input gradient is made. Without autograd: the loss alone, the same."""
    hidden, weight, targets = inputs(torch.float32)
    hidden.requires_grad_()
    trained = chunked_cross_entropy(hidden, weight, targets)
    trained.backward()
    assert weight.grad is None and hidden.grad is not None
    with torch.no_grad():
        evaluated = chunked_cross_entropy(hidden, weight, targets)
    assert evaluated.grad_fn is None
    torch.testing.assert_close(evaluated, trained.detach())


MATMULS = ("aten::mm", "aten::addmm_")


def allocations(run: Callable[[], object]) -> tuple[int, int]:
    """(peak, net) bytes the CPU allocator handed out while `run` ran, above what existed before: its own records of
    every allocation and free, in order (torch.profiler's memory events). Left out: the scratch a matmul allocates
    and frees inside itself, which the CPU's bf16 and fp16 kernels take (oneDNN) and cuBLAS does not (its workspace is
    part of the CUDA runtime's memory)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as recorded:
        run()
    assert recorded.profiler is not None and recorded.profiler.kineto_results is not None
    events: list[Any] = list(recorded.profiler.kineto_results.events())  # _KinetoEvent: nbytes() is not in its stub
    matmuls = [(e.start_ns(), e.start_ns() + e.duration_ns()) for e in events if e.name() in MATMULS]
    memory = sorted((e for e in events if e.name() == "[memory]"), key=lambda event: event.start_ns())
    scratch: set[int] = set()
    for start, end in matmuls:
        inside = [i for i, event in enumerate(memory) if start <= event.start_ns() <= end]
        for i in inside:  # an allocation freed again before the matmul returns
            freed = next(
                (j for j in inside if j > i and j not in scratch and memory[j].nbytes() == -memory[i].nbytes()), None
            )
            if memory[i].nbytes() > 0 and freed is not None:
                scratch |= {i, freed}
    alive = list(itertools.accumulate(event.nbytes() for i, event in enumerate(memory) if i not in scratch))
    return max(alive, default=0), alive[-1] if alive else 0


@pytest.mark.parametrize("trains_weight", [True, False], ids=["trained", "frozen"])
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_the_sizing_model_counts_what_the_loss_allocates(precision: str, trains_weight: bool) -> None:
    """What stays after the forward (the gradients and the loss) to the byte; the forward's peak above it: the chunk's
    buffers to the byte, plus per-token vectors within their bound; backward's one allocation (fp16's cast) too."""
    shape = replace(PRESETS["tiny"], vocab_size=VOCAB, hidden_size=HIDDEN)
    predicted = loss_bytes(shape, TOKENS, precision, trains_weight, chunk_tokens=CHUNK)
    hidden, weight, targets = inputs(TORCH_DTYPES[precision])
    hidden.requires_grad_()
    weight.requires_grad_(trains_weight)
    result: list[torch.Tensor] = []
    peak, retained = allocations(lambda: result.append(chunked_cross_entropy(hidden, weight, targets)))
    assert retained == predicted.retained
    vectors = loss_chunks.VECTOR_BYTES_PER_TOKEN * CHUNK
    assert predicted.chunk - vectors <= peak - retained <= predicted.chunk
    backward_peak, _ = allocations(lambda: result[0].backward())
    assert predicted.cast <= backward_peak <= predicted.cast + 16  # the loss's own gradient, a scalar


def tiny_model() -> Any:
    """A transformers model (its embedding accessors are not nn.Module's)."""
    config = hf_config(resolve_model("tiny"))
    model = build_meta_model(config)
    use_chunked_loss(model)
    model.to_empty(device="cpu")
    init_buffers(model, torch.device("cpu"))
    init_weights(model, seed=0, std=config.initializer_range)
    return model


def test_through_the_model_the_head_returns_the_loss_only_while_labels_are_set() -> None:
    model = tiny_model()
    assert isinstance(model.get_output_embeddings(), ChunkedLossHead)
    generator = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 256, (2, 40), generator=generator)
    targets = torch.randint(0, 256, (2, 40), generator=generator)
    targets[0, :5] = targets[1, 30:] = IGNORE_INDEX  # 80 tokens: five chunks of 16
    positions = torch.arange(40).expand(2, 40)  # one record per row: the same attention as a plain forward's
    summed = summed_token_loss(model, tokens, targets, positions)
    summed.backward()
    ours = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    logits = model(input_ids=tokens).logits  # labels unset again: the logits
    assert logits.shape == (2, 40, 260)
    reference = cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX, reduction="sum")
    reference.backward()
    torch.testing.assert_close(summed, reference)
    assert ours.keys() == {name for name, p in model.named_parameters() if p.grad is not None}
    for name, parameter in model.named_parameters():
        torch.testing.assert_close(ours[name], parameter.grad, msg=name)


def test_the_labels_are_cleared_when_the_forward_fails() -> None:
    model = tiny_model()
    with pytest.raises(IndexError), labels_for_loss(model, torch.zeros(2, 4, dtype=torch.long)):
        model(input_ids=torch.full((2, 4), 10_000))  # an id past the vocabulary
    assert model.get_output_embeddings().labels is None
