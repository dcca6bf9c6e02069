"""What every row of the GPU benchmark (bench/gpu_mfu.py) shares: the work, flash attention pinned, the timed
windows, and the result file a row writes. torch and the standard library only: torchtitan's row imports it too, and
nothing of our trainer may change what torchtitan runs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch


@dataclass(frozen=True)
class Work:
    """What both trainers train in a row: a Llama 3.1 8B-shaped decoder with `layers` layers, or, on a dry run, the
    tiny preset's shape on the CPU."""

    layers: int
    seq_len: int
    batch_size: int
    warmup_steps: int
    window_steps: int
    windows: int
    compile: bool
    device: str  # cuda, or cpu on a dry run

    @property
    def steps(self) -> int:
        return self.warmup_steps + self.window_steps * self.windows

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.seq_len

    def to_argv(self) -> list[str]:
        return [f"--{name.replace('_', '-')}={value}" for name, value in asdict(self).items()]


def compile_backend(work: Work) -> str:
    """inductor on the GPU. On a dry run aot_eager: the same tracing (fullgraph) and the same autograd graphs, without
    inductor's C++ code generation, which takes minutes on a CPU."""
    return "inductor" if work.device == "cuda" else "aot_eager"


def add_work_arguments(parser: object) -> None:
    """The Work's fields as flags (argparse), for both row scripts."""
    for name, kind in (("layers", int), ("seq_len", int), ("batch_size", int), ("warmup_steps", int),
                       ("window_steps", int), ("windows", int), ("device", str)):  # fmt: skip
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, required=True)  # type: ignore[attr-defined]
    parser.add_argument("--compile", type=lambda text: text == "True", required=True)  # type: ignore[attr-defined]


def work_from(args: object) -> Work:
    return Work(**{name: getattr(args, name) for name in Work.__dataclass_fields__})


@dataclass
class RowResult:
    """One row's run, as bench/gpu_mfu.py reads it back."""

    trainer: str
    compile: bool
    tokens_per_step: int
    window_seconds: list[float]
    """Each timed window's wall time, its steps' work finished on the device."""
    window_steps: int
    parameters: int
    """Every parameter of the model as built (DTensor parameters counted whole)."""
    matmul_parameters: int
    """Those that take part in matrix multiplies: all but the input embedding's (a lookup)."""
    attention_flops_per_token: float
    peak_memory_bytes: int
    attention: str
    """What ran as attention, read from the first timed step's operators."""
    notes: list[str] = field(default_factory=list)

    @property
    def flops_per_token(self) -> float:
        """6 N (forward and backward of every matmul parameter) + the attention's 12 L H T."""
        return 6.0 * self.matmul_parameters + self.attention_flops_per_token

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def read(cls, path: Path) -> RowResult:
        return cls(**json.loads(path.read_text()))


def attention_flops_per_token(layers: int, attention_width: int, seq_len: int) -> float:
    """12 L H T: the attention scores and weighted values, forward and backward (PaLM, Chowdhery et al. 2022,
    appendix B), as trainer/base/metrics/figures.py training_flops_per_token and torchtitan's get_nparams_and_flops
    count them."""
    return 12.0 * layers * attention_width * seq_len


def pin_flash_attention() -> None:
    """Only SDPA's flash kernel enabled, process-wide (the CPU's flash kernel on a dry run): an SDPA call that the
    flash kernel cannot take raises rather than falling back to another."""
    torch.backends.cuda.enable_flash_sdp(True)
    torch.backends.cuda.enable_mem_efficient_sdp(False)
    torch.backends.cuda.enable_math_sdp(False)
    torch.backends.cuda.enable_cudnn_sdp(False)


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


class Windows:
    """Wall time of each window of `window_steps` steps after `warmup_steps` untimed ones, each window closed when
    the device has finished its work. `step_done()` after every step."""

    def __init__(self, work: Work) -> None:
        self.work, self.steps, self.seconds = work, 0, []
        self.opened = 0.0

    def step_done(self) -> None:
        self.steps += 1
        timed = self.steps - self.work.warmup_steps
        if timed >= 0 and timed % self.work.window_steps == 0:
            synchronize(self.work.device)
            now = time.perf_counter()
            if timed > 0:
                self.seconds.append(now - self.opened)
            self.opened = now


ATTENTION_NAMES = ("attention", "flash", "flex", "sdpa", "fmha", "efficient")


def attention_operators(step: Callable[[], object], device: str) -> str:
    """The attention operators and GPU kernels torch's profiler saw in one call of `step`."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if device == "cuda" else [])]
    with profile(activities=activities) as recorded:
        step()
    keys = {event.key for event in recorded.key_averages()}
    names = sorted(key for key in keys if any(name in key.lower() for name in ATTENTION_NAMES)
                   and not key.startswith("autograd::") and not key.endswith("Backward0"))  # fmt: skip
    return "; ".join(name[:80] for name in names[:6]) or "no operator or kernel named for attention"


def peak_memory_bytes(device: str) -> int:
    """The device's allocated peak (as our trainer reports it); on a dry run the process's peak resident set."""
    if device == "cuda":
        return int(torch.cuda.max_memory_allocated())
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")
