"""Measured and predicted peak memory per rank of the trainer on CPU (helpers for test_memory_model.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from sizing.memory import Job, MemoryEstimate, Ranks, peak_memory
from stack.paths import PROJECT_ROOT as ROOT
from tests.harness.trainer_runs import trainer_env
from trainer.base.model.presets import PRESETS

# glibc keeps freed blocks below its (dynamic, up to 32 MiB) mmap threshold in the heap, so peak RSS would measure
# the allocator's high-water mark rather than the bytes the job holds. With M_MMAP_THRESHOLD fixed at 64 KiB
# (mallopt(3); settable as MALLOC_MMAP_THRESHOLD_) every tensor of 64 KiB or more is mapped when allocated and
# unmapped when freed, so peak RSS follows live memory, as torch.cuda.max_memory_allocated does on a GPU.
MEASUREMENT_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


@dataclass(frozen=True)
class Case:
    model: str
    strategy: str
    ranks: int
    seq_len: int = 256
    batch_size: int = 2
    checkpointing: str = "none"

    def trainer_args(self) -> list[str]:
        return [
            "--model", self.model, "--dataset", "synthetic", "--device", "cpu", "--mixed-precision", "fp32",
            "--sharding-strategy", self.strategy, "--activation-checkpointing", self.checkpointing,
            "--seq-len", str(self.seq_len), "--batch-size", str(self.batch_size), "--steps", "2",
        ]  # fmt: skip

    def job(self) -> Job:
        return Job(
            PRESETS[self.model], self.seq_len, self.batch_size, self.strategy, "fp32", self.checkpointing, grad_accum=1
        )

    def predicted(self, baseline_bytes: int) -> MemoryEstimate:
        # torchrun --standalone puts every rank on one node: HYBRID_SHARD shards over all of them.
        return peak_memory(self.job(), Ranks(self.ranks, self.ranks, device="cpu"), baseline_bytes)


def _env() -> dict[str, str]:
    return {**trainer_env(), **MEASUREMENT_ENV}


def _launch(module: str, args: list[str], ranks: int, env: dict[str, str], timeout: float) -> None:
    launcher = [sys.executable, "-m"]
    if ranks > 1:
        launcher += ["torch.distributed.run", "--standalone", "--nnodes", "1", "--nproc-per-node", str(ranks), "-m"]
    command = [*launcher, module, *args]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode and "SIGABRT" in result.stdout + result.stderr:
        # A gloo worker aborting at start-up or exit has been seen once in many runs on a loaded machine; it says
        # nothing about memory, so the run gets one more try (a second failure is reported with both outputs).
        first = result.stdout + result.stderr
        result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        result.stderr = f"{result.stderr}\n--- first attempt ---\n{first}"
    if result.returncode:
        raise RuntimeError(f"{module} {' '.join(args)} exited {result.returncode}:\n{result.stdout}{result.stderr}")


def measure_baseline(case: Case, workdir: Path, timeout: float = 120) -> int:
    """Peak RSS of the busiest rank just before the trainer would build the model.

    Measured twice, keeping the lower: on a fresh machine the first start-up also pays one-off work (caches being
    filled) whose transient memory later runs never see, which would inflate the baseline by a few hundred MiB."""
    peaks = []
    for _ in range(2):
        output = workdir / f"baseline-{uuid.uuid4().hex[:8]}.jsonl"
        env = {**_env(), "PROBE_OUTPUT": str(output)}
        _launch("tests.sizing.trainer_memory.baseline_probe", case.trainer_args(), case.ranks, env, timeout)
        records = [json.loads(line) for line in output.read_text().splitlines()]
        assert len(records) == case.ranks, records
        peaks.append(max(record["peak_rss_bytes"] for record in records))
    return min(peaks)


def measure_peak(case: Case, workdir: Path, timeout: float = 240) -> int:
    """The trainer's own `peak_memory_bytes` (peak RSS of the busiest rank) after two steps."""
    metrics = workdir / f"metrics-{uuid.uuid4().hex[:8]}.jsonl"
    _launch("trainer", [*case.trainer_args(), "--metrics-file", str(metrics)], case.ranks, _env(), timeout)
    records = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    return int(records[-1]["peak_memory_bytes"])
