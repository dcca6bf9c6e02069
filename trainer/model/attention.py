"""The attention the trainer's models use: transformers' SDPA function under a name of its own.

transformers 5 prepares a causal mask before every forward (masking_utils.create_causal_mask). With no attention
mask and no cache, as in training, it looks for packed sequences in the position ids (find_packed_sequence_indices)
and tests the result with a Python `if` on a device tensor: a host-device synchronisation in every forward. A name
that has no mask function registered (ALL_MASK_ATTENTION_FUNCTIONS) makes that preparation exit early with no mask,
and SDPA then runs with is_causal=True (integrations/sdpa_attention.py), which is exactly the causal attention
over each packed block that the trainer trains with: same kernels, same numbers, no synchronisation.
"""

from __future__ import annotations

CAUSAL_SDPA = "fsdp_eks_causal_sdpa"


def causal_sdpa() -> str:
    """Register the attention function (idempotent) and return the name to build models with."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    AttentionInterface.register(CAUSAL_SDPA, sdpa_attention_forward)
    return CAUSAL_SDPA
