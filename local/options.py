"""What one local run is asked to do, what it changes in the stack's config, and how it refuses bad input.
`LocalOptions` comes from the CLI or a test, `LocalJobOptions` is the job's part of it, and `Override` is one change to
the config."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from local.artifacts import S3Upload
from local.drills.trigger import Trigger
from local.launch import WorkerOptions

DEFAULT_TIMEOUT_S = 1800.0
DRILL_LOG_EVERY = 1  # a drill's run logs every step: its recovery is timed from the last before it to the first after


@dataclass(frozen=True)
class Override:
    """One setting the local run changes: what, the stack's value, the local value, and why."""

    setting: str
    stack_value: Any
    local_value: Any
    reason: str

    def describe(self) -> str:
        return f"{self.setting}: {self.local_value} (stack: {self.stack_value}) - {self.reason}"


@dataclass(frozen=True)
class LocalJobOptions:
    """What the user may change on the command line; None keeps the stack's (or the local default's) value."""

    nodes: int | None = None
    min_nodes: int | None = None
    steps: int | None = None
    checkpoint_every: int | None = None
    model: str | None = None
    dataset: str | None = None
    api: str | None = None  # job.api: pytorchjob or trainjob
    max_restarts: int | None = None  # job.maxRestarts: torchrun's restarts (PyTorchJob), the JobSet's (TrainJob)
    max_disruption_restarts: int | None = None  # job.maxDisruptionRestarts: a TrainJob's uncounted gang restarts
    global_batch_size: int | None = None  # job.globalBatchSize: lost-storage's new cluster keeps the lost one's
    nproc_per_node: int = 1  # workers per agent here (the cluster's is the node's GPU count)
    batch_size: int | None = None  # job.batchSize: sequences per worker and micro step
    log_every: int | None = None  # the trainer's --log-every here (None: the manifest's); every step under a drill


class LocalRunError(ValueError):
    """Bad input: the message says what is wrong and what to do; nothing was left running."""


@dataclass(frozen=True)
class LocalOptions:
    stack: str = "dev"
    job: LocalJobOptions = field(default_factory=LocalJobOptions)
    work_dir: Path | None = None  # default: runs/local/<job>-<time> in the project (git-ignored)
    etcd_port: int | None = None  # for the etcd started here; default a free one
    etcd_endpoint: str | None = None  # HOST:PORT of a running etcd to use instead of starting one
    etcd_binary: str | None = None
    drill: str | None = None
    trigger: Trigger = field(default_factory=Trigger)
    drill_pod: int = -1
    timeout_s: float = DEFAULT_TIMEOUT_S
    echo: Callable[[str], None] = print
    s3_uploads: tuple[S3Upload, ...] = ()  # local files put into the run's S3 API before the job starts


def worker_options(options: LocalOptions) -> WorkerOptions:
    """What the run sets in each pod's workers beyond the manifest (--nproc-per-node; every step logged under a
    drill, so that its recovery is timed to the step)."""
    log_every = options.job.log_every or (DRILL_LOG_EVERY if options.drill else None)
    return WorkerOptions(options.job.nproc_per_node, log_every)
