"""How a job's controller restarts after a failed pod, as the local run's supervisor asks it (local/supervise.py). Each
job API's local run gives its own (local/pytorchjob/pods.py PodRestarts, local/trainjob/pods.py GangRestarts)."""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from local.agents import JobPods
from local.launch import LocalPlan


@dataclass(frozen=True)
class AfterFailure:
    """What the job's controller does once an attempt has stopped on a failure: start every pod again on `plan`, or,
    with plan None, end the job for `reason`."""

    plan: LocalPlan | None
    reason: str = ""


class RestartRule(Protocol):
    """How the job's controller restarts after a failed pod (that pod alone, or the whole gang): within an attempt,
    through the pods it makes (`pods`), and between attempts (`after_failure`)."""

    chart_title: str  # after the job's name on the chart

    def pods(self, plan: LocalPlan, log_dir: Path) -> JobPods:
        """One attempt's pods, not yet started."""
        ...

    def after_failure(self, pods: JobPods, plan: LocalPlan, disrupted: Set[str]) -> AfterFailure:
        """`disrupted`: the pods a drill evicted since the last failure (they carry the condition DisruptionTarget)."""
        ...

    def pod_restarts(self, pods: JobPods, plan: LocalPlan) -> int:
        """Restarts and re-creations of all pods together, over every attempt."""
        ...
