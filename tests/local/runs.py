"""Helpers of the end-to-end tests: the dev stack's job run locally, and a check for leftover processes.

Small on purpose (the tiny model, one worker per agent but for the blocking drill's two, 40 steps): the machine may
have two shared cores.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from local.options import LocalJobOptions, LocalOptions
from local.run import run_local
from local.supervise import LocalResult

STEPS = 40
CHECKPOINT_EVERY = 10
# Two agents, elastic down to one: the global batch stays 8 sequences (2 ranks x 4, or 1 rank x 4 x 2 micro steps).
ELASTIC = LocalJobOptions(nodes=2, min_nodes=1, steps=STEPS, checkpoint_every=CHECKPOINT_EVERY)
# A node's shape for the blocking drill: two workers per agent, each with half the batch, so that the global batch (8)
# and the loss curve are the clean run's.
NPROC_PER_NODE = 2
NODE_SHAPED = dataclasses.replace(ELASTIC, nproc_per_node=NPROC_PER_NODE, batch_size=2)
RUN_TIMEOUT_S = 240.0  # the run gives up, and cleans up, before pytest-timeout would stop the test
TEST_TIMEOUT_S = 420


def run_dev(work_dir: Path, **changes: Any) -> LocalResult:
    """The dev stack's job, run locally with two elastic agents unless `changes` (LocalOptions fields) say else."""
    options = LocalOptions(stack="dev", job=ELASTIC, work_dir=work_dir, timeout_s=RUN_TIMEOUT_S)
    return run_local(dataclasses.replace(options, **changes))


def processes_mentioning(text: str) -> list[str]:
    """Live processes whose command line mentions `text` (a run's directory: its etcd, agents and workers do)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # exited while we looked
        if text in command and state != "Z":
            found.append(f"{entry.name}: {command[:160]}")
    return found


def final_loss(result: LocalResult) -> float:
    assert result.summary is not None, "no metrics were written"
    return result.summary.final_loss


def log_of(result: LocalResult, pod: int) -> str:
    return (result.work_dir / "logs" / f"{result.plan.job}-worker-{pod}.log").read_text(errors="replace")
