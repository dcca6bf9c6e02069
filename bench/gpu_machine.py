"""What bench/gpu_mfu.py records of the machine it ran on: software versions, the GPU's clocks (read, never set), and
its measured bf16 matmul rate. Reading only: the card's settings are left as found, as its lender requires.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import platform
import shutil
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass, field

import torch

CLOCK_FIELDS = ("clocks.sm", "clocks.mem", "clocks.max.sm", "power.draw", "power.limit", "temperature.gpu")


def package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def software() -> dict[str, str]:
    facts = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "cudnn": str(torch.backends.cudnn.version()) if torch.cuda.is_available() else "n/a",
        "transformers": package_version("transformers"),
        "triton": package_version("triton"),
    }
    if torch.cuda.is_available():
        facts["gpu"] = torch.cuda.get_device_name()
        facts["gpu_memory_bytes"] = str(torch.cuda.get_device_properties(0).total_memory)
        facts["capability"] = ".".join(map(str, torch.cuda.get_device_capability()))
    return facts


def nvidia_smi(fields: tuple[str, ...]) -> dict[str, str] | None:
    """One reading of the first GPU, or None where nvidia-smi is absent (a CPU dry run)."""
    if shutil.which("nvidia-smi") is None:
        return None
    query = ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits", "--id=0"]
    done = subprocess.run(query, capture_output=True, text=True, timeout=20, check=False)
    if done.returncode:
        return {"error": done.stderr.strip() or done.stdout.strip()}
    return dict(zip(fields, (value.strip() for value in done.stdout.split(",")), strict=False))


def driver() -> dict[str, str] | None:
    return nvidia_smi(("name", "driver_version", "memory.total", "clocks.max.sm", "clocks.max.mem", "power.limit"))


@dataclass
class ClockSampler:
    """nvidia-smi every `every_s` seconds in a thread, each reading tagged with the row running then."""

    every_s: float = 2.0
    row: str = ""
    samples: list[dict[str, str]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> ClockSampler:
        if shutil.which("nvidia-smi") is not None:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            reading = nvidia_smi(CLOCK_FIELDS)
            if reading and self.row:
                self.samples.append({"row": self.row, **reading})

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=30)

    def summary(self, row: str) -> dict[str, float] | None:
        """Median SM clock (MHz) and power (W), highest temperature (C) over the row's readings."""
        readings = [sample for sample in self.samples if sample["row"] == row]

        def numbers(name: str) -> list[float]:
            found = []
            for reading in readings:
                with contextlib.suppress(KeyError, ValueError):
                    found.append(float(reading[name]))
            return found

        sm, power, temperature = numbers("clocks.sm"), numbers("power.draw"), numbers("temperature.gpu")
        if not sm:
            return None
        return {"sm_clock_mhz": statistics.median(sm), "power_w": statistics.median(power or [0.0]),
                "max_temperature_c": max(temperature or [0.0]), "readings": len(readings)}  # fmt: skip


def matmul_tflops(size: int = 8192, repeats: int = 20) -> float | None:
    """The bf16 matrix product's rate on random data (CUDA events, after a warm-up), TFLOP/s; None without a GPU."""
    if not torch.cuda.is_available():
        return None
    a, b = (torch.randn(size, size, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    for _ in range(3):
        torch.mm(a, b)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeats):
        start.record()
        torch.mm(a, b)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    del a, b
    torch.cuda.empty_cache()
    return 2 * size**3 / statistics.median(times) / 1e12


def now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %Z")


def main() -> None:
    """Run as a process of its own by bench/gpu_mfu.py, so that the benchmark's own process never holds the GPU."""
    import json

    print(json.dumps({"software": software(), "matmul_bf16_tflops": matmul_tflops()}))


if __name__ == "__main__":
    main()
