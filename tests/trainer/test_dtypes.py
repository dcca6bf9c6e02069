"""The precision names mean the same in every layer: the sizes sizing/ counts with are torch's own, and each name a
flag accepts has both a size and a torch dtype."""

from __future__ import annotations

from trainer.base.flags.config import EXPORT_DTYPES, MIXED_PRECISIONS
from trainer.base.units import DTYPE_BYTES
from trainer.dtypes import TORCH_DTYPES


def test_each_precision_has_the_size_torch_gives_its_dtype() -> None:
    assert TORCH_DTYPES.keys() == DTYPE_BYTES.keys()
    assert {name: dtype.itemsize for name, dtype in TORCH_DTYPES.items()} == DTYPE_BYTES


def test_every_precision_a_flag_accepts_has_a_dtype() -> None:
    assert set(MIXED_PRECISIONS) | set(EXPORT_DTYPES) <= TORCH_DTYPES.keys()
