"""torchtitan for the lent GPU machine (torch 2.11, no network): the release that runs on that torch, and the wheels it
needs there, downloaded here and carried with the working tree (bench/.wheels, git-ignored).

    python bench/carried_torchtitan.py            # downloads the wheels into bench/.wheels (PyPI)

Which release: torchtitan 0.3.0 calls torch APIs that torch 2.11 lacks (torch.distributed.set_timeout,
torch.distributed.fsdp.DataParallelMeshDims, torch.compiler._is_non_strict_tracing, torch.Tag.inplace, ...); 0.2.2,
the release before it, names none that 2.11 lacks (every `torch.` name in its modules, outside experiments/, resolved
against torch 2.11.0's; docs/performance.md says how) and runs its Llama 3 trainer on 2.11 (the dry run of
bench/gpu_mfu.py, run by hand on a torch 2.11.0 wheel, and tests/trainer/test_gpu_mfu.py under tests/harness/floor.py).
torchtitan declares no torch requirement; it is installed without dependencies over the machine's torch, with those
of its imports the machine lacks (its KINDS.md package list): tyro (its config), torchdata (its data loader base
class), datasets (imported by its Llama 3 data loaders, which the benchmark never builds) and their own missing
requirements. pip reads none of them from the network there: `--no-index` from this folder.

PATCHES make torchtitan 0.2.2 run on a CPU with gloo, for the dry run; each is a no-op where a GPU is present.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from packaging.tags import sys_tags
from packaging.utils import parse_wheel_filename

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

from bench.torchtitan_setup import CPU_PATCHES, Patch, apply_patch  # noqa: E402

TORCHTITAN = ("torchtitan", "0.2.2")
CARRIED = (
    TORCHTITAN,
    ("tyro", "1.0.17"),
    ("docstring_parser", "0.18.0"),
    ("typeguard", "4.6.1"),
    ("torchdata", "0.11.0"),
    ("datasets", "5.2.0"),  # the trainer's own lock's, with its two requirements the machine lacks
    ("dill", "0.4.1"),
    ("multiprocess", "0.70.19"),
)
WHEELS = ROOT / "bench" / ".wheels"
# The lent GPU machine (docs/performance.md, "On a GPU"): CPython 3.12 on x86-64 Linux.
PLATFORM_ARGS = ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
                 *(arg for tag in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
                   for arg in ("--platform", tag))]  # fmt: skip

PATCHES = (
    Patch(
        "models/moe/utils.py",
        "from .kernels import generate_permute_indices\n",
        "try:  # no triton with a CPU-only torch; a dense Llama never calls the MoE kernels\n"
        "    from .kernels import generate_permute_indices\n"
        "except ImportError:\n"
        "    pass\n",
        "every model import pulls in the MoE Triton kernels; triton does not exist for a CPU-only torch (the GPU "
        "machine has it, and there the import is as before)",
    ),
    Patch(
        "components/metrics.py",
        "from torch.utils.tensorboard import SummaryWriter\n",
        "try:  # only for --metrics.enable_tensorboard, which the benchmark leaves off\n"
        "    from torch.utils.tensorboard import SummaryWriter\n"
        "except ImportError:\n"
        "    pass\n",
        "the test environment has no tensorboard (the lent machine has)",
    ),
    *CPU_PATCHES,
    Patch(
        "models/llama3/infra/parallelize.py",
        "            module.set_gradient_divide_factor(1.0)\n",
        "            module.set_gradient_divide_factor(1.0)\n"
        '            if torch.distributed.get_backend() == "gloo":  # gloo has no PREMUL_SUM\n'
        "                module.set_force_sum_reduction_for_comms(True)\n",
        "a divide factor of 1 makes FSDP2 reduce-scatter with PREMUL_SUM(1.0), which gloo lacks; SUM is the same "
        "reduction",
    ),
)


def wheel_files(directory: Path = WHEELS) -> list[Path]:
    """Of each carried package and version, the wheel this interpreter prefers (pip's order of its tags), or
    SystemExit naming what is missing. (multiprocess has a wheel per Python version: the folder holds the lent
    machine's and this one's.)"""
    preference = {tag: rank for rank, tag in enumerate(sys_tags())}
    found = []
    for name, version in CARRIED:
        candidates = sorted(directory.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
        ranked = sorted(
            (min(preference.get(tag, len(preference)) for tag in parse_wheel_filename(path.name)[3]), path)
            for path in candidates
        )
        if not ranked or ranked[0][0] == len(preference):
            raise SystemExit(f"{directory}: no {name} {version} wheel for this Python "
                             "(python bench/carried_torchtitan.py downloads them)")  # fmt: skip
        found.append(ranked[0][1])
    return found


def download(directory: Path = WHEELS) -> list[Path]:
    """The carried wheels from PyPI, for the lent machine's Python (the device README's recipe) and for this one's
    (the dry run here installs them too)."""
    directory.mkdir(parents=True, exist_ok=True)
    requirements = [f"{name}=={version}" for name, version in CARRIED]
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--index-url", "https://pypi.org/simple"]
    subprocess.run([*pip, *PLATFORM_ARGS, "-d", str(directory), *requirements], check=True)
    subprocess.run([*pip, "--only-binary=:all:", "-d", str(directory), *requirements], check=True)
    return wheel_files(directory)


def install(site: Path, directory: Path = WHEELS) -> Path:
    """The carried wheels installed into `site` without the network or dependencies, torchtitan patched; the path
    to put first on PYTHONPATH."""
    wheels = [str(path) for path in wheel_files(directory)]
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-compile",
                    "--no-cache-dir", "--target", str(site), *wheels], check=True)  # fmt: skip
    for patch in PATCHES:
        apply_patch(site / "torchtitan", patch)
    return site


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=WHEELS)
    args = parser.parse_args(argv)
    for path in download(args.dir):
        print(path)


if __name__ == "__main__":
    main()
