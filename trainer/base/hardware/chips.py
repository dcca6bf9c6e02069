"""Peak dense bf16 tensor throughput per accelerator chip (the denominator of MFU) and its memory bandwidth.

Pure data, no torch import. The instance catalog (sizing/catalog.py) names the chip of each instance type and
takes its peak from here, so each figure is written once. Figures are NVIDIA's datasheet numbers without
structured sparsity.
"""

from __future__ import annotations

PEAK_BF16_FLOPS: dict[str, float] = {
    # H100 SXM5 datasheet: 989 TFLOPS bf16 dense (1,979 with sparsity).
    "H100-SXM": 989e12,
    # H200 SXM datasheet: same compute die as H100 SXM, 989 TFLOPS bf16 dense.
    "H200-SXM": 989e12,
    # A100 SXM4 datasheet (40 GB and 80 GB): 312 TFLOPS bf16 dense.
    "A100-SXM": 312e12,
    # L40S datasheet: 362 TFLOPS bf16 dense (733 with sparsity).
    "L40S": 362e12,
}

HBM_BYTES_PER_S: dict[str, float] = {
    # H100 SXM5 datasheet: 3.35 TB/s.
    "H100-SXM": 3.35e12,
    # H200 SXM datasheet: 4.8 TB/s.
    "H200-SXM": 4.8e12,
    # A100 80 GB SXM4 datasheet: 2,039 GB/s (the 40 GB part: 1,555 GB/s).
    "A100-SXM": 2.039e12,
    # L40S datasheet: 864 GB/s (GDDR6).
    "L40S": 0.864e12,
}

# torch.cuda.get_device_name() substrings -> chip names above, for the trainer's own lookup on a GPU.
DEVICE_NAME_TO_CHIP: tuple[tuple[str, str], ...] = (
    ("H200", "H200-SXM"),
    ("H100", "H100-SXM"),
    ("A100", "A100-SXM"),
    ("L40S", "L40S"),
)


def chip_for_device_name(device_name: str) -> str | None:
    """The chip name for a CUDA device name such as 'NVIDIA H100 80GB HBM3', or None if unknown."""
    for fragment, chip in DEVICE_NAME_TO_CHIP:
        if fragment in device_name:
            return chip
    return None
