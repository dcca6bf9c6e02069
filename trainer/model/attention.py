"""The attention the trainer's models use: causal within each packed record, never across records.

A block holds several records (trainer/data/blocks.py), its positions restarting at 0 at each record's start. The
mask is built once per forward from those positions (`document_inputs`) and passed to the model as its
attention_mask; every layer's attention reads it:
- CUDA: flex attention (torch.nn.attention.flex_attention, compiled) with a BlockMask of the records' causal
  blocks: tiles outside every record are skipped, so a block of short records costs less than causal attention
  over the whole block, and nothing of size seq_len x seq_len is materialised (the BlockMask holds a few integers per
  128 x 128 tile).
- CPU: SDPA with a boolean mask [batch, 1, seq, seq] (the CPU flash kernel takes a mask and grouped key/value heads,
  exact to float rounding); flex attention has no backward on CPU (torch/nn/attention/flex_attention.py
  _validate_device: "FlexAttention does not support backward on CPU").
Key/value heads are never repeated: both paths take grouped-query attention as it is (enable_gqa).

transformers 5 prepares a mask before every forward (masking_utils.create_causal_mask); a 4-D mask or a BlockMask
passed in is returned as is (_preprocess_mask_arguments), with no look at the positions and no host-device
synchronisation. Without a mask (a forward outside training) the attention is causal over the whole input, SDPA's
is_causal, as transformers' own SDPA would run it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import torch
from torch.nn.functional import scaled_dot_product_attention

DOCUMENT_ATTENTION = "fsdp_eks_document_attention"
"""The name the models are built with: it has no mask function registered in transformers, so transformers builds
no mask of its own for it."""


def document_attention() -> str:
    """Register the attention function (idempotent) and return the name to build models with."""
    from transformers import AttentionInterface

    AttentionInterface.register(DOCUMENT_ATTENTION, attention_forward)
    return DOCUMENT_ATTENTION


def document_ids(positions: torch.Tensor) -> torch.Tensor:
    """[batch, seq]: which record of its block each position belongs to (a new one wherever the position is 0)."""
    return (positions == 0).cumsum(dim=-1)


def boolean_mask(positions: torch.Tensor) -> torch.Tensor:
    """[batch, 1, seq, seq], True where a query may attend to a key: the same record, at or before the query."""
    documents = document_ids(positions)
    seq = positions.shape[-1]
    causal = torch.ones(seq, seq, dtype=torch.bool, device=positions.device).tril()
    return ((documents[:, :, None] == documents[:, None, :]) & causal)[:, None]


@cache
def _compiled_flex() -> tuple[Any, Any]:
    """flex_attention and create_block_mask compiled once per process: eager flex attention runs an unfused
    reference (scores materialised), and compiled create_block_mask evaluates the mask without a seq x seq tensor
    (torchtitan compiles both the same way)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    return torch.compile(flex_attention, dynamic=False), torch.compile(create_block_mask)


def block_mask(positions: torch.Tensor, compiled: bool = True) -> Any:
    """The flex attention BlockMask of the records' causal blocks (batch-specific, shared by every head)."""
    from torch.nn.attention.flex_attention import create_block_mask

    documents = document_ids(positions)

    def same_record_causal(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        return (documents[b, q] == documents[b, kv]) & (q >= kv)

    make = _compiled_flex()[1] if compiled else create_block_mask
    batch, seq = positions.shape
    return make(same_record_causal, batch, None, seq, seq, device=positions.device)


def uses_flex(device: torch.device) -> bool:
    """Flex attention where it trains fast (CUDA); SDPA with a boolean mask elsewhere."""
    return device.type == "cuda"


def document_mask(positions: torch.Tensor) -> Any:
    """The attention mask of a batch of packed blocks, for the device the positions are on."""
    return block_mask(positions) if uses_flex(positions.device) else boolean_mask(positions)


def document_inputs(positions: torch.Tensor) -> dict[str, Any]:
    """What a forward over packed blocks takes besides the ids: each token's position in its record (the rotary
    embedding's) and the records' mask."""
    return {"position_ids": positions, "attention_mask": document_mask(positions)}


def attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention interface: q [batch, heads, seq, dim], k and v [batch, kv heads, seq, dim]; the output
    [batch, seq, heads, dim]."""
    from torch.nn.attention.flex_attention import BlockMask

    grouped = query.shape[1] != key.shape[1]
    if isinstance(attention_mask, BlockMask):
        if dropout:
            raise ValueError("flex attention applies no attention dropout; the config's attention_dropout must be 0")
        output = flex_attention(query, key, value, attention_mask, scaling, grouped)
    else:
        output = scaled_dot_product_attention(
            query,
            key,
            value,
            attn_mask=attention_mask,
            dropout_p=dropout,
            scale=scaling,
            is_causal=attention_mask is None and query.shape[2] > 1,
            enable_gqa=grouped,
        )
    return output.transpose(1, 2).contiguous(), None


def flex_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: Any, scaling: float | None, grouped: bool
) -> torch.Tensor:
    """Compiled flex attention. Inside a compiled layer (--compile) flex attention itself, which the layer's graph
    compiles with it (a call of a separately compiled function there would break the layer's full graph); eager on CPU
    (forward only: the tests' check of the BlockMask there)."""
    from torch.nn.attention.flex_attention import flex_attention as run

    if query.device.type == "cuda" and not torch.compiler.is_compiling():
        run = _compiled_flex()[0]
    return run(query, key, value, block_mask=mask, scale=scaling, enable_gqa=grouped)
