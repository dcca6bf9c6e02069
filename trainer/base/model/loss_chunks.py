"""The chunked loss's shape (trainer/model/loss.py), torch-free: the chunk size and the dtype its weight gradient adds
up in, which the loss and the sizing model (sizing/memory.py loss_bytes) both read."""

from __future__ import annotations

CHUNK_TOKENS = 1024
"""Tokens per chunk: enough that the chunk's matmuls run at the matrix units' rate (1024 x 4096 x 128256 is about a
teraflop), few enough that its fp32 logits (0.5 GiB at a 128k vocabulary) stay a small share of memory."""

VECTOR_BYTES_PER_TOKEN = 64
"""At most this many bytes per chunk token in the loss's small per-token vectors (label mask, class index, maximum,
sum, target logit, their temporaries): measured 29 (fp32) on torch 2.13; a bound, as the allocator's scalars and the
order of frees inside these few operations are torch's, not this project's."""


def accumulator_precision(precision: str) -> str:
    """The precision the weight gradient adds up in over the chunks: the compute precision, except fp16, whose
    range a sum over many tokens could exceed before backward scales it by the loss's gradient (1 / tokens)."""
    return "fp32" if precision == "fp16" else precision
