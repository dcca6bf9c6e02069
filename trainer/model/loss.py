"""The training loss without the vocabulary's logits: the output layer and the cross-entropy, chunk by chunk of tokens,
the gradients made in the same pass.

The plain loss (the output layer's logits, then cross-entropy) holds tokens x vocabulary values several times: the
logits in the compute dtype, their fp32 copy, the saved log-probabilities and, in backward, their fp32 gradient (for
Llama 3's 128k vocabulary at 8192 tokens, 2 GiB in bf16 and 3.9 GiB per fp32 copy). Here the output layer, while
`labels_for_loss` sets its labels, returns the summed cross-entropy of its input's tokens instead of their logits
(`ChunkedLossHead`). For each chunk of tokens (trainer/base/model/loss_chunks.py) it computes the chunk's logits in
fp32, its loss, and that loss's gradient with respect to the logits (softmax minus one-hot, zero for IGNORE_INDEX
labels), and from it, at once, the chunk's input gradient and its share of the weight gradient, as Liger Kernel's fused
linear cross-entropy does (LigerFusedLinearCrossEntropyFunction). Backward only scales the two by the loss's own
gradient. The matmuls are the plain loss's three, none recomputed; what is alive at once is one chunk's logits, never
the vocabulary's logits for every token.

The head is still called as a module by transformers' forward (`logits = self.lm_head(hidden_states)`), so FSDP2's
hooks on the output layer's unit run as before; the model's output `logits` then holds the summed loss.
sizing/memory.py counts the bytes of every tensor this allocates (loss_bytes); tests/trainer/test_chunked_loss.py
checks the count against what torch's allocator reports: every buffer of a chunk's logits, the gradients and the
loss to the byte, the per-token vectors within their bound.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from trainer.base.model import loss_chunks
from trainer.base.model.loss_chunks import accumulator_precision
from trainer.data.packed import IGNORE_INDEX
from trainer.dtypes import TORCH_DTYPES

PRECISIONS = {dtype: name for name, dtype in TORCH_DTYPES.items()}


def accumulator_dtype(weight_dtype: torch.dtype) -> torch.dtype:
    """The weight gradient's dtype while the chunks add into it (trainer/base/model/loss_chunks.py)."""
    return TORCH_DTYPES[accumulator_precision(PRECISIONS[weight_dtype])]


def _chunk_loss(logits: torch.Tensor, labels: torch.Tensor, gradient: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The chunk's summed loss, and its fp32 `logits` turned in place into the loss's gradient with respect to them
    (softmax minus one-hot; rows of ignored labels zero) when `gradient`."""
    counted = labels != IGNORE_INDEX
    rows = labels.clamp(min=0).unsqueeze(1)  # ignored rows look up class 0, then count for nothing
    target = logits.gather(1, rows).squeeze(1)
    peak = logits.amax(1)
    logits.sub_(peak.unsqueeze(1)).exp_()
    total = logits.sum(1)
    loss = torch.where(counted, peak + total.log() - target, 0.0).sum()
    if gradient:
        logits.mul_(torch.where(counted, total.reciprocal(), 0.0).unsqueeze(1))
        logits.scatter_add_(1, rows, counted.unsqueeze(1).to(logits.dtype).neg())
    return loss, logits


def _chunk(
    inputs: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor,
    grad_inputs: torch.Tensor | None,
    grad_weight: torch.Tensor | None,
) -> torch.Tensor:
    """One chunk's summed loss; its input gradient written into `grad_inputs` and its weight gradient added into
    `grad_weight`, where given. A function of its own so that the chunk's buffers are freed when it returns, before
    the next chunk's are allocated."""
    gradient = grad_inputs is not None or grad_weight is not None
    logits = torch.mm(inputs, weight.t()).float()  # a copy unless the compute dtype is fp32 already
    loss, dlogits = _chunk_loss(logits, labels, gradient)
    if not gradient:
        return loss
    del logits
    dlogits = dlogits.to(inputs.dtype)  # the fp32 buffer is freed here unless the compute dtype is fp32
    if grad_inputs is not None:
        torch.mm(dlogits, weight, out=grad_inputs)
    if grad_weight is not None and grad_weight.dtype == dlogits.dtype:
        grad_weight.addmm_(dlogits.t(), inputs)
    elif grad_weight is not None:  # fp16 into its fp32 sum: the product cast explicitly, alike on every device
        grad_weight.add_(torch.mm(dlogits.t(), inputs).float())
    return loss


def _losses(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor,
    grad_hidden: torch.Tensor | None,
    grad_weight: torch.Tensor | None,
) -> torch.Tensor:
    """The summed loss over every chunk; the gradients written (grad_hidden) and added (grad_weight) when given."""
    loss = torch.zeros((), dtype=torch.float32, device=hidden.device)
    size = loss_chunks.CHUNK_TOKENS  # read at each call: tests shrink it
    for start in range(0, hidden.shape[0], size):
        chunk = slice(start, start + size)
        grad_inputs = None if grad_hidden is None else grad_hidden[chunk]
        loss += _chunk(hidden[chunk], weight, labels[chunk], grad_inputs, grad_weight)
    return loss


class _ChunkedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        want_hidden, want_weight = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_hidden = torch.empty_like(hidden) if want_hidden else None
        grad_weight = torch.zeros_like(weight, dtype=accumulator_dtype(weight.dtype)) if want_weight else None
        loss = _losses(hidden, weight, labels, grad_hidden, grad_weight)
        # Kept on ctx, not saved for backward: backward hands them on as they are, the only reference to each, so
        # the weight's becomes its .grad without a copy (autograd's AccumulateGrad takes a tensor nothing else holds).
        ctx.grads, ctx.weight_dtype = [grad_hidden, grad_weight], weight.dtype
        return loss

    @staticmethod
    def backward(ctx: Any, grad_loss: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        grad_hidden, grad_weight = ctx.grads
        ctx.grads = [None, None]
        if grad_hidden is not None:
            grad_hidden.mul_(grad_loss)
        if grad_weight is not None:
            grad_weight = grad_weight.mul_(grad_loss).to(ctx.weight_dtype)
        return grad_hidden, grad_weight, None


def chunked_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """sum over tokens of cross_entropy(hidden @ weight.T, labels, ignore_index=IGNORE_INDEX), in fp32; hidden is
    [..., H], labels the matching [...]. Differentiable in hidden and weight; without autograd (evaluation, a frozen
    chain) only the loss is computed."""
    hidden, labels = hidden.reshape(-1, hidden.shape[-1]), labels.reshape(-1)
    if torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad):
        return _ChunkedCrossEntropy.apply(hidden, weight, labels)
    return _losses(hidden, weight, labels, None, None)


class ChunkedLossHead(nn.Linear):
    """The output layer: an nn.Linear (same parameter, same name) whose forward returns the logits, or, while
    `labels` is set (labels_for_loss), the summed cross-entropy of its input against them."""

    labels: torch.Tensor | None = None

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if self.labels is None:
            return super().forward(input)
        return chunked_cross_entropy(input, self.weight, self.labels)


def use_chunked_loss(model: nn.Module) -> None:
    """Make the model's output layer a ChunkedLossHead: before parallelize, which wraps the layer's class in FSDP's."""
    # A transformers PreTrainedModel: nn.Module's type does not show its embedding accessors.
    hf_model: Any = model
    head = hf_model.get_output_embeddings()
    if type(head) is not nn.Linear or head.bias is not None:
        raise ValueError(f"the output layer is {head!r}; the chunked loss replaces a bias-free nn.Linear")
    head.__class__ = ChunkedLossHead


@contextmanager
def labels_for_loss(model: nn.Module, labels: torch.Tensor) -> Iterator[None]:
    """Within: the model's forward returns, as its `logits`, the summed loss of its tokens against `labels`."""
    hf_model: Any = model
    head = hf_model.get_output_embeddings()
    if not isinstance(head, ChunkedLossHead):
        raise TypeError("the model's output layer is not a ChunkedLossHead (use_chunked_loss)")
    head.labels = labels
    try:
        yield
    finally:
        head.labels = None
