"""Training: the trainer's own figures (loss, throughput, MFU, step time, memory, restarts), as rank 0 serves them.

Every name comes from trainer/base/metrics/figures.py's METRIC_FIELDS by its JSON key, so a renamed metric breaks here,
at import, and in the dashboards test, rather than in an empty panel.
"""

from __future__ import annotations

from typing import Any

from trainer.base.metrics.figures import METRIC_FIELDS
from workloads.platform.dashboards.panels import Panel, Query, dashboard


def metric(key: str) -> str:
    """The Prometheus name of the trainer's figure `key` (a key of its --metrics-file records)."""
    return METRIC_FIELDS[key][0]


def training_dashboard() -> dict[str, Any]:
    # Only rank 0 serves metrics, so each query returns one series per job (with the pod that runs rank 0).
    per_pod = "{{pod}}"
    panels = [
        Panel("Step", (Query(metric("step")),), kind="stat", width=6, height=4),
        Panel(
            "World size",
            (Query(metric("world_size")),),
            kind="stat",
            width=6,
            height=4,
            description="Ranks in the current worker group; it drops when an elastic job goes on with fewer nodes.",
        ),
        Panel(
            "Restarts",
            (Query(metric("restarts")),),
            kind="stat",
            width=6,
            height=4,
            description="Times the workers were started again in this run, the same count on every node.",
        ),
        Panel(
            "MFU",
            (Query(metric("mfu")),),
            unit="percentunit",
            kind="stat",
            width=6,
            height=4,
            description="Model FLOPs utilisation: achieved training FLOP/s over the GPUs' dense bf16 peak.",
        ),
        Panel(
            "Loss",
            (Query(metric("loss"), f"training {per_pod}"), Query(metric("val_loss"), f"validation {per_pod}")),
            description="Mean cross-entropy per trained token: of the last step's batch, and of the held-out set at "
            "the last evaluation (job.validation).",
        ),
        Panel(
            "Throughput",
            (Query(metric("tokens_per_second"), "job"), Query(metric("tokens_per_second_per_gpu"), "per GPU")),
            unit="short",
            description="Trained tokens per second, for the whole job and per rank.",
        ),
        Panel("Model FLOPs utilisation", (Query(metric("mfu"), per_pod),), unit="percentunit"),
        Panel(
            "Step time",
            (Query(metric("step_time_s"), per_pod),),
            unit="s",
            description="Mean wall time of one optimizer step since the previous log line.",
        ),
        Panel(
            "Peak memory",
            (Query(metric("peak_memory_bytes"), per_pod),),
            unit="bytes",
            description="Peak GPU memory allocated on the busiest rank.",
        ),
        Panel(
            "Restarts and world size",
            (Query(metric("restarts"), "restarts"), Query(metric("world_size"), "world size")),
        ),
        Panel("Learning rate", (Query(metric("lr"), per_pod),), unit="sci"),
        Panel(
            "Gradient norm",
            (Query(metric("grad_norm"), per_pod),),
            description="Global gradient norm before clipping; spikes often precede loss spikes.",
        ),
        *validation_panels(per_pod),
    ]
    return dashboard(
        uid="fsdp-eks-training",
        title="fsdp-eks / Training",
        description="The FSDP trainer's metrics, from rank 0's Prometheus endpoint.",
        panels=panels,
        refresh="10s",
    )


def validation_panels(legend: str) -> list[Panel]:
    """The held-out set's figures (job.validation): empty until the first evaluation, and in a job without one."""
    return [
        Panel(
            "Validation perplexity",
            (Query(metric("val_perplexity"), legend),),
            description="exp(validation loss) of the held-out set at each evaluation: it rising while the training "
            "loss falls is the run memorising its data.",
        ),
        Panel(
            "Best validation loss",
            (Query(metric("best_val_loss")),),
            kind="stat",
            width=6,
            description="The lowest validation loss of the run so far.",
        ),
        Panel(
            "Best validation step",
            (Query(metric("best_val_step")),),
            unit="none",  # a step number, not a quantity to abbreviate as 1.2K
            kind="stat",
            width=6,
            description="The step of the best validation loss: the checkpoint job.validation.keepBest keeps and "
            "exports.",
        ),
    ]
