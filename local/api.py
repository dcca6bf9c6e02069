"""The job API as the local run plays it: what differs between a PyTorchJob's run and a TrainJob's, behind one
interface. workloads/job/api.py puts their objects behind one in the same way.

local/run.py runs every job the same way and asks the job's API (`local/apis.py local_api_for`) for its parts:
- the stack's objects rendered for this machine and admitted as the cluster admits them (`admitted`);
- the torchrun agents that run its pods here (`plan`), and its lines in the run's header (`describe`,
  `rule_lines`);
- how its controller restarts after a failed pod (`restart_rule`, local/restart_rule.py);
- what it changes in the stack's job settings to run here (`job_changes`), and the options of the run it refuses
  (`refuse_options`);
- the drills it can take (`drills`), and whether it goes on at fewer nodes (`elastic`).
Each implementation lives in a folder of its own (local/pytorchjob/, local/trainjob/) and imports no other's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from local.drills.base import Drill
from local.drills.registry import DRILLS
from local.launch import LocalPlan, WorkerOptions
from local.options import LocalJobOptions, LocalOptions, LocalRunError
from local.restart_rule import RestartRule
from stack.config import JobConfig, StackConfig


@dataclass(frozen=True)
class AdmittedJob:
    """A stack's job rendered by the stack's own builders for this machine, and admitted as the cluster would."""

    name: str  # the job's name: the run's directory and the pods are named after it
    objects: tuple[dict[str, Any], ...]  # its custom resources in the order they are created
    nodes: range  # the node counts the job goes on at (a PyTorchJob's elastic range): what a drill checks


@dataclass(frozen=True)
class JobChange:
    """One job.* setting the run changes for this API: its key, the stack's value, the local one, and why."""

    key: str
    stack_value: Any
    local_value: Any
    reason: str


class LocalJobApi(ABC):
    """One job API's run on this machine. Implementations hold no state between runs."""

    name: ClassVar[str]  # the job.api value (stack/job_api.py)
    drills: ClassVar[tuple[type[Drill], ...]]  # the drills its run can take
    elastic: ClassVar[bool]  # whether the job goes on with fewer nodes (rather than restarting them all)
    manifest_file: ClassVar[str]  # where the run keeps the admitted objects, in its directory

    @abstractmethod
    def job_changes(self, job: JobConfig, options: LocalJobOptions) -> list[JobChange]:
        """The job.* settings of the stack's `job` that this API's run here changes (local/config.py applies them)."""

    def refuse_options(self, options: LocalOptions) -> None:
        """Raise LocalRunError for options this API's run has no use for."""
        return None

    def refuse_drill(self, name: str) -> None:
        """Raise LocalRunError for a drill this API's run cannot take (a name no drill has is the registry's to
        refuse)."""
        if name in DRILLS and DRILLS[name] not in self.drills:
            raise LocalRunError(f"--drill {name}: its drills are {', '.join(d.name for d in self.drills)}")

    @abstractmethod
    def admitted(self, config: StackConfig) -> AdmittedJob:
        """The stack's job for `config`, rendered by the stack's builders and admitted as the cluster's webhooks and
        controllers admit it; LocalRunError where the cluster would refuse it."""

    @abstractmethod
    def plan(
        self,
        job: AdmittedJob,
        work_dir: Path,
        etcd_endpoint: str | None,
        stand_ins: dict[str, str],
        workers: WorkerOptions,
    ) -> LocalPlan:
        """The torchrun agents that run the job's pods here, with files under `work_dir`, the rendezvous store at
        `etcd_endpoint` (None where the platform runs none for this API), the container variables `stand_ins` (the
        local S3 API's) and the `workers` each agent starts; LocalRunError where the objects cannot be run."""

    @abstractmethod
    def describe(self, stack: str, job: AdmittedJob, plan: LocalPlan, etcd_endpoint: str | None) -> list[str]:
        """The run header's first lines: what runs where, and its rendezvous."""

    def rule_lines(self, job: AdmittedJob) -> list[str]:
        """The run header's lines on the rules that judge the job after a failure, where they are worth showing."""
        return []

    @abstractmethod
    def restart_rule(self, job: AdmittedJob, echo: Callable[[str], None]) -> RestartRule:
        """How the API's controller restarts after a failed pod: that pod alone, or the whole gang."""
