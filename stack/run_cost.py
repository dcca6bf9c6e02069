"""What one run of the stack's job costs in GPU node-hours, phase by phase, at the price a preview read: the
`estimatedRunCost` output.

Modelled, not measured: the training and evaluation times are sizing/'s estimates (jobSizing.time); bring-up and
staging are the assumptions below, which no run has measured yet. Every GPU node bills through every phase, from its
launch until the cluster autoscaler removes it after the job (stack/gpu_autoscaling.py), or until someone scales the
group to zero where the stack keeps idle nodes. The CPU system nodes, the control plane, FSx and S3 are left out:
they bill whether a run is going or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sizing.estimate import RunTime
from sizing.fsx import STAGED_WEIGHT_BYTES
from stack.config import StackConfig
from stack.fit import stack_run_time
from stack.gpu_autoscaling import SCALE_DOWN_UNNEEDED_S, releases_idle_nodes
from stack.price_list import PriceQuote
from trainer.base.model.presets import PRESETS, find_shape

# Assumed: an instance's launch, its joining the cluster, the NVIDIA and EFA device plugins and the trainer image's
# pull (several GB) before the first pod starts; EKS and EC2 publish no figure for p5 (docs/aws.md gives "several
# minutes" per step). To be replaced by a measured figure.
ASSUMED_BRING_UP_S = 15 * 60
# Assumed: a model's weights staged once per run (trainer/stage.py) from the Hugging Face hub or S3 at 200 MB/s.
ASSUMED_STAGING_BYTES_PER_S = 200e6


@dataclass(frozen=True)
class Phase:
    name: str
    seconds: float | None  # None: not estimated
    basis: str


def staged_bytes(config: StackConfig) -> int:
    """The hub or S3 weights a run stages; none for a randomly initialised preset or a model not known here."""
    shape = find_shape(config.job.model)
    if shape is None or config.job.model in PRESETS:
        return 0
    return shape.num_parameters * STAGED_WEIGHT_BYTES


def run_phases(config: StackConfig, time: RunTime | None) -> list[Phase]:
    """A run's phases, each billed on every GPU node."""
    staged = staged_bytes(config)
    release = (
        Phase("idleUntilReleased", SCALE_DOWN_UNNEEDED_S, "the cluster autoscaler's scale-down-unneeded-time")
        if releases_idle_nodes(config.gpu_nodes)
        else Phase("idleUntilReleased", None, "gpuNodes.keepIdleNodes: the nodes bill until the group is scaled down")
    )
    return [
        Phase("bringUp", ASSUMED_BRING_UP_S, "assumed: launch, join, device plugins, image pull"),
        Phase(
            "staging",
            staged / ASSUMED_STAGING_BYTES_PER_S,
            f"assumed: {staged / 1e9:.1f} GB of weights at {ASSUMED_STAGING_BYTES_PER_S / 1e6:.0f} MB/s",
        ),
        Phase(
            "training",
            time.steps * time.step_s if time else None,
            "modelled: jobSizing's step time x job.steps",
        ),
        Phase("evaluations", time.evaluation_s if time else None, "modelled: jobSizing's evaluations"),
        release,
    ]


def run_cost(config: StackConfig, price: PriceQuote, time: RunTime | None = None) -> dict[str, Any]:
    """The `estimatedRunCost` output: the GPU nodes' price per hour, each phase's hours and dollars, the total."""
    time = time if time is not None else stack_run_time(config)
    nodes = config.gpu_nodes.count
    per_hour = nodes * price.usd_per_hour
    phases = run_phases(config, time) if config.job.enabled else []
    known = [p for p in phases if p.seconds is not None]
    return {
        "gpuNodes": nodes,
        "usdPerHour": round(per_hour, 2),
        "price": price.to_output(),
        "phases": {
            p.name: {
                "hours": None if p.seconds is None else round(p.seconds / 3600, 3),
                "usd": None if p.seconds is None else round(per_hour * p.seconds / 3600, 2),
                "basis": p.basis,
            }
            for p in phases
        },
        "totalUsd": round(per_hour * sum(p.seconds or 0.0 for p in known) / 3600, 2) if known else None,
        "complete": bool(phases) and len(known) == len(phases),
    }
