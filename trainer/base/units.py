"""Units and per-dtype sizes that every layer shares, written once in the lowest layer and imported.

Pure data, no torch import: sizing/ and the trainer's metrics read it; trainer/dtypes.py maps the same dtype names
to torch's dtypes, and a test holds the two maps to the same names and sizes.
"""

from __future__ import annotations

# A gibibyte: torch reports memory in bytes, AWS sizes GPU memory, volumes and FSx in GiB.
GIB = 2**30
# Bytes per element of each precision the trainer's --mixed-precision and --export-dtype flags name.
DTYPE_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp32": 4}
