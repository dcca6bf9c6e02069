"""Running the trainer as users do: `python -m trainer` or torchrun in a subprocess, with its metrics file read back."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stack.paths import PROJECT_ROOT as ROOT
from tests.harness.fork_server import ForkServer

# The tiny preset on CPU in fp32: every test that compares losses uses these settings.
TINY = [
    "--model", "tiny", "--device", "cpu", "--mixed-precision", "fp32", "--seq-len", "32", "--batch-size", "2",
    "--global-batch-size", "8", "--steps", "6", "--lr", "1e-3", "--warmup-steps", "2", "--weight-decay", "0.1",
    "--seed", "7", "--log-every", "1",
]  # fmt: skip
TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@dataclass
class TrainerRun:
    returncode: int
    output: str
    """stdout and stderr together (rank 0's log, torchrun's report)."""
    metrics: list[dict[str, Any]] = field(default_factory=list)

    def losses(self) -> dict[int, float]:
        """Loss per step; for a step logged twice (before a crash and after the restart) the later one."""
        return {record["step"]: record["loss"] for record in self.metrics}


def with_flags(args: list[str], **flags: str) -> list[str]:
    """args with some flags set to new values (added when absent): with_flags(TINY, seed="8", steps="1")."""
    args = list(args)
    for name, value in flags.items():
        flag = "--" + name.replace("_", "-")
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
    return args


def trainer_env(fault: str | None = None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in TORCHRUN_VARIABLES}
    env.pop("TRAINER_FAULT", None)
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    if fault:
        env["TRAINER_FAULT"] = fault
    return env


@functools.cache
def trainer_server() -> ForkServer:
    """The warm server for one-process runs of the trainer's modules, started with the trainer's environment (torch's
    OpenMP runtime reads OMP_NUM_THREADS once, when the server imports it)."""
    return ForkServer(env=trainer_env())


def run_served(
    module: str, args: list[str], env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`python -m module *args` in the project's root with exactly `env`, as subprocess.run(capture_output=True,
    text=True) gives it back, but forked from trainer_server(): a new process that finds torch and the other
    third-party modules of earlier runs imported, and imports the project's own modules afresh."""
    with tempfile.TemporaryDirectory() as tmp:
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        status = trainer_server().run(module, args, env, ROOT, out, timeout, err=err)
        command = [sys.executable, "-m", module, *args]
        return subprocess.CompletedProcess(command, status, out.read_text(), err.read_text())


def run_trainer(
    args: list[str],
    workdir: Path,
    nproc: int = 1,
    *,
    torchrun: bool | None = None,
    fault: str | None = None,
    max_restarts: int = 0,
    timeout: float = 150,
    module: str = "trainer",
    env: dict[str, str] | None = None,
    launcher: str = "torch.distributed.run",
) -> TrainerRun:
    """Run the trainer (or a module that wraps it, such as a probe); torchrun (standalone rendezvous on a free port)
    unless it is one plain process, through `launcher` (torchrun's module, or trainer.launch as in the pods). `env`
    adds to the environment the trainer runs with."""
    if "--metrics-file" not in args:
        args = [*args, "--metrics-file", str(workdir / f"metrics-{uuid.uuid4().hex[:8]}.jsonl")]
    metrics_file = Path(args[args.index("--metrics-file") + 1])
    if torchrun is None:
        torchrun = nproc > 1
    if torchrun:
        command = [sys.executable, "-m", launcher, "--standalone", "--nnodes", "1"]
        command += ["--nproc-per-node", str(nproc), "--max-restarts", str(max_restarts), "-m", module]
    else:
        command = [sys.executable, "-m", module]
    process = subprocess.Popen(
        [*command, *args],
        cwd=ROOT,
        env={**trainer_env(fault), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.terminate()  # torchrun passes SIGTERM on to its workers; SIGKILL would orphan them
        try:
            output, _ = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
        output = f"TIMED OUT after {timeout}s\n{output}"
    metrics = []
    if metrics_file.exists():
        metrics = [json.loads(line) for line in metrics_file.read_text().splitlines() if line.strip()]
    return TrainerRun(process.returncode, output, metrics)


def assert_same_losses(actual: dict[int, float], expected: dict[int, float], rel: float = 1e-5) -> None:
    """Equal per step within a tight fp32 tolerance (reduction order differs between world sizes)."""
    assert sorted(actual) == sorted(expected), (sorted(actual), sorted(expected))
    for step, loss in expected.items():
        assert abs(actual[step] - loss) <= rel * abs(loss), f"step {step}: {actual[step]} != {loss}"
