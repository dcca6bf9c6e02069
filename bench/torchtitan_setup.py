"""torchtitan in an environment of its own, for bench/vs_torchtitan.py and bench/gpu_mfu.py; never vendored, never
committed.

    python bench/torchtitan_setup.py            # creates bench/.torchtitan-venv (git-ignored); idempotent

Installs the project's torch first (`pip install torch==2.13.0`: on this project's machines the local CPU build,
before anything could pull another; on a GPU machine reaching PyPI, its CUDA build), then torchtitan from PyPI with
its own dependencies, then applies the small changes its 0.3.0 release needs to run on a CPU with gloo and torch
2.13 (PATCHES below, each checked to apply exactly once; none changes what runs on a GPU). docs/performance.md
lists them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

TORCH = "torch==2.13.0"  # the project's torch (Makefile): the comparison is between trainers, not torch builds
TORCHTITAN = "torchtitan==0.3.0"  # the newest release; it declares no torch pin of its own
VENV = Path(__file__).resolve().parent / ".torchtitan-venv"


@dataclass(frozen=True)
class Patch:
    file: str
    """Path inside the installed torchtitan package."""
    old: str
    new: str
    why: str


CPU_PATCHES = (
    Patch(
        "tools/utils.py",
        'device_type = _get_available_device_type() or "cuda"',
        'device_type = _get_available_device_type() or "cpu"',
        "with no accelerator torchtitan assumes CUDA; the CPU is the device here (torch.cpu has the set_device and "
        "device_count it calls)",
    ),
    Patch(
        "components/metrics.py",
        "        self.device = torch.device(device)  # device object\n",
        "        self.device = torch.device(device)  # device object\n"
        '        if device_type == "cpu":  # no allocator statistics on CPU\n'
        '            self.device_name, self.device_index, self.device_capacity = "cpu", 0, 1\n'
        "            self.device_capacity_gib = 0.0\n"
        "            return\n",
        "its memory monitor reads CUDA allocator statistics, which a CPU does not have; the benchmark measures "
        "peak memory itself (VmHWM), as it does for ours",
    ),
    Patch(
        "components/metrics.py",
        "        device_info = device_module.memory_stats(self.device)",
        '        device_info = device_module.memory_stats(self.device) if device_type != "cpu" else {}',
        "(the same: no allocator statistics to read on CPU)",
    ),
    Patch(
        "components/metrics.py",
        "    def reset_peak_stats(self):\n        device_module.reset_peak_memory_stats()",
        '    def reset_peak_stats(self):\n        if device_type != "cpu":\n'
        "            device_module.reset_peak_memory_stats()",
        "(the same)",
    ),
    Patch(
        "distributed/utils.py",
        "    torch.distributed.barrier(device_ids=[device_module.current_device()])",
        '    torch.distributed.barrier(device_ids=None if device_type == "cpu" else [device_module.current_device()])',
        "the barrier before shortening the timeouts passes the device index; torch.cpu.current_device() is the "
        "string 'cpu', which barrier() rejects",
    ),
)
"""What any torchtitan release since 0.2.2 needs on a CPU with gloo (bench/carried_torchtitan.py's release too)."""

PATCHES = (
    Patch(
        "distributed/minimal_async_ep/api.py",
        "from torchtitan.distributed.minimal_async_ep.kernels import (",
        "try:  # CPU: no triton; the expert-parallel kernels are never called by a dense model\n"
        "    from torchtitan.distributed.minimal_async_ep.kernels import (",
        "every model import pulls in the MoE expert-parallel Triton kernels; triton does not exist for a CPU-only "
        "torch, and a dense Llama never calls them",
    ),
    Patch(
        "distributed/minimal_async_ep/api.py",
        "    topk_scores_grad_kernel,\n)\n",
        "    topk_scores_grad_kernel,\n    )\nexcept ImportError:\n    pass\n",
        "(the closing half of the change above)",
    ),
    *CPU_PATCHES,
    Patch(
        "distributed/fsdp.py",
        "            module.set_gradient_divide_factor(1.0)\n",
        "            module.set_gradient_divide_factor(1.0)\n"
        "            module.set_force_sum_reduction_for_comms(True)  # gloo has no PREMUL_SUM\n",
        "a divide factor of 1 makes FSDP2 reduce-scatter with PREMUL_SUM(1.0), which gloo does not implement; "
        "forcing SUM is the same reduction (FSDP2 then divides by the factor, 1)",
    ),
    Patch(
        "distributed/utils.py",
        "    for group in groups:\n        torch.distributed.set_timeout(timeout, group)",
        "    for group in groups if hasattr(torch.distributed, 'set_timeout') else ():\n"
        "        torch.distributed.set_timeout(timeout, group)",
        "after the first step it shortens the process groups' timeouts with torch.distributed.set_timeout, which "
        "torch 2.13 does not have (a newer torch's API); the timeouts only matter for a hung job",
    ),
)


def site_packages(environment: Path) -> Path:
    return next((environment / "lib").glob("python3*/site-packages"))


def apply_patch(package: Path, patch: Patch) -> None:
    """Apply once: a patch already applied is left alone; one whose text is missing is an error (another release)."""
    path = package / patch.file
    text = path.read_text()
    if patch.new in text:
        return
    if text.count(patch.old) != 1:
        raise SystemExit(f"{path}: expected one '{patch.old.splitlines()[0]}' ({TORCHTITAN} only)")
    path.write_text(text.replace(patch.old, patch.new))


def pip(environment: Path, *args: str) -> None:
    subprocess.run([str(environment / "bin" / "python"), "-m", "pip", "install", "--quiet", *args], check=True)


def set_up(environment: Path = VENV) -> Path:
    """The environment's python, installed and patched."""
    python = environment / "bin" / "python"
    if not python.exists():
        venv.create(environment, with_pip=True)
    pip(environment, TORCH)
    pip(environment, TORCHTITAN)
    package = site_packages(environment) / "torchtitan"
    for patch in PATCHES:
        apply_patch(package, patch)
    return python


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=VENV)
    args = parser.parse_args(argv)
    python = set_up(args.venv)
    print(python)


if __name__ == "__main__":
    sys.exit(main())
