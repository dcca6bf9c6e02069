"""What the job's trainer runs with: the trainer's own TrainConfig (trainer/base/flags/config.py), built once from the
stack's job settings and the pod's layout. The manifest's flags are `to_argv` of it, so the trainer's parser reads back
exactly this object; the policy pack and the pull-request summary parse those flags with that parser.

Pure and torch-free, like workloads/job/spec.py, which carries the result as JobSpec.trainer.
"""

from __future__ import annotations

from dataclasses import replace

from sizing.fsx import JOB_SAVES_IN_BACKGROUND
from stack.names import TRAINER_METRICS_PORT
from trainer.base.flags.config import TrainConfig
from workloads.job.shutdown import TERMINATION_GRACE_S, checkpoint_stop_wait

# Prometheus scrapes the pod IP, so the endpoint binds to every address.
METRICS_HOST = "0.0.0.0"


def data_cache_dir(run_directory: str) -> str:
    """The tokenised data set, staged once per run (workloads/job/staging.py)."""
    return f"{run_directory}/data-cache"


def pod_trainer_config(trainer: TrainConfig, run_directory: str, peak_tflops: float) -> TrainConfig:
    """`trainer` as a worker pod runs it: its files in the run's directory on the checkpoint volume, the staged data
    cache, the metrics endpoint the PodMonitor scrapes, the node's GPU peak as MFU's denominator, the GPUs required,
    and the shutdown waits that fit inside the pod's grace period (workloads/job/shutdown.py)."""
    return replace(
        trainer,
        data=replace(trainer.data, cache_dir=data_cache_dir(run_directory)),
        # cuda: fail on a node without a visible GPU rather than train on its CPUs
        parallel=replace(trainer.parallel, device="cuda"),
        checkpoint=replace(
            trainer.checkpoint,
            directory=f"{run_directory}/checkpoints",
            export_hf=f"{run_directory}/hf",
            async_save=JOB_SAVES_IN_BACKGROUND,  # what the storage sizing assumes of the job's saves
            stop_wait_s=float(checkpoint_stop_wait(TERMINATION_GRACE_S)),
        ),
        metrics=replace(
            trainer.metrics,
            file=f"{run_directory}/metrics.jsonl",
            port=TRAINER_METRICS_PORT,
            host=METRICS_HOST,
            peak_tflops=peak_tflops,
        ),
    )
