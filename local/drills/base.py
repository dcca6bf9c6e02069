"""What every drill has: its trigger, its report, and the interface the run calls (`Drill`)."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from local.agents import JobPods, Pod
from local.artifacts import LocalStorage
from local.drills.trigger import Trigger
from local.etcd import LocalEtcd
from local.launch import LocalPlan
from local.options import LocalJobOptions
from local.procs import Proc, process_tree
from local.restart_rule import RestartRule
from trainer.checkpoint.layout import complete_checkpoints


class DrillError(ValueError):
    """The drill cannot run in this setup (the message says what to change)."""


def pod_workers(pod: Pod) -> list[Proc]:
    """The processes below the pod's agent: its workers (the torch elastic agent starts each as its child)."""
    return process_tree(pod.process.pid)[1:] if pod.process is not None else []


@dataclass(frozen=True)
class DrillReport:
    drill: str
    at_step: int  # the last step the leader had logged when the fault was injected
    checkpoint_step: int | None  # the newest complete checkpoint right after the fault: the resume point
    detail: str
    killed: tuple[Proc, ...] = ()  # kill-agent, kill-workers, hung-peer: every process that got SIGKILL
    repeats: int = 1  # kill-workers: how many times it killed a set of workers (0: there were none to kill)
    blocked: tuple[Proc, ...] = ()  # hung-peer: the workers left inside their collective, as NCCL peers are
    evicted_at: tuple[int | None, ...] = ()  # evict-pod: the newest complete checkpoint at each eviction
    resumed_from: str | None = None  # lost-storage: the checkpoint the new cluster's trainer resumed from (its log)
    resumed_tier: str | None = None  # ... and which source that was (fast tier, durable tier, --resume-from)
    fired_at: float = 0.0  # when the fault was injected (time.time(), as the metrics records' "time")
    held_connections: int = 0  # hung-peer: the workers' connections kept open past their deaths


@dataclass
class Injected:
    """What one injection did: its line for the run's output, and the processes it killed or left blocked."""

    detail: str
    killed: list[Proc]
    blocked: list[Proc]


def newest_checkpoint_step(checkpoint_dir: Path | None) -> int | None:
    found = complete_checkpoints(checkpoint_dir) if checkpoint_dir else []
    return found[-1][0] if found else None


class Drill(ABC):
    """One fault, injected once its trigger is met; `poll` is called from the runner's loop. A subclass names the
    drill, checks that the job can take it, and injects it; the hooks below it may override say what else it does."""

    name: ClassVar[str]  # what --drill takes
    targets_pod: ClassVar[bool] = False  # aimed at one worker pod (--drill-pod)

    def __init__(
        self, trigger: Trigger, nodes: range, local_etcd: bool, pod_index: int = -1, elastic: bool = True
    ) -> None:
        """Check that the drill can run here before anything starts. `nodes` is the node counts the job goes on at
        (a PyTorchJob's elastic range, min to max agents); `elastic`: whether the job goes on with fewer nodes rather
        than restarting them all; pod_index -1 is the last worker pod."""
        replicas = nodes.stop - 1
        self.check_job(nodes, replicas, local_etcd, elastic)
        if self.targets_pod and not -replicas <= pod_index < replicas:
            raise DrillError(f"--drill-pod {pod_index}: the job has worker pods 0 to {replicas - 1}")
        self.check_machine()
        self.trigger, self.pod_index = trigger, pod_index % max(replicas, 1)
        self.report: DrillReport | None = None
        self.disrupted: set[str] = set()  # pods evicted since the gang's last look (take_disrupted)

    @staticmethod
    def job_defaults(job: LocalJobOptions, elastic: bool) -> LocalJobOptions:
        """The job's options with what the drill needs where the user left them unset (`elastic`: see __init__)."""
        return job

    def check_job(self, nodes: range, replicas: int, local_etcd: bool, elastic: bool) -> None:  # noqa: B027 - a hook most drills leave empty
        """Raise DrillError where the job's shape cannot take the drill (`replicas`: its worker pods)."""

    def check_machine(self) -> None:  # noqa: B027 - a hook most drills leave empty
        """Raise DrillError where this machine cannot inject the drill."""

    def describe(self, pods: Sequence[str]) -> str:
        """The drill for the run's header; `pods` are the worker pods' names."""
        return f"{self.name}{self.target(pods)} {self.trigger.describe()}"

    def target(self, pods: Sequence[str]) -> str:
        return f" {pods[self.pod_index]}" if self.targets_pod else ""

    def agent_env(self, pod_index: int) -> dict[str, str]:
        """What the drill adds to the environment of pod `pod_index`'s agent from its start."""
        return {}

    def attach_storage(self, plan: LocalPlan, storage: LocalStorage) -> None:  # noqa: B027 - a hook most drills leave empty
        """Give the drill the run's volumes and S3 API, once they exist (before the pods start)."""

    def restart_rule(
        self, rule: RestartRule, new_plan: Callable[[], LocalPlan], echo: Callable[[str], None]
    ) -> RestartRule:
        """The job's restart rule while the drill runs: the API's own `rule`, unless the drill replaces the cluster
        (`new_plan`: the job's agents on a new one)."""
        return rule

    def poll(self, pods: JobPods, etcd: LocalEtcd | None, checkpoint_dir: Path | None, last_step: int) -> str:
        """Inject the fault if it is due; returns what it did ("" when nothing). The report (`self.report`) is
        made when the drill first fires; a drill that fires again adds to it (`after_fired`)."""
        if self.report is not None:
            return self.after_fired(pods, checkpoint_dir)
        if not self.due(checkpoint_dir, last_step):
            return ""
        fired_at = time.time()
        injected = self.inject(pods, etcd)
        self.report = self.first_report(last_step, self.resume_point(checkpoint_dir), injected, fired_at)
        return injected.detail

    def due(self, checkpoint_dir: Path | None, last_step: int) -> bool:
        return self.trigger.met(checkpoint_dir, last_step)

    @abstractmethod
    def inject(self, pods: JobPods, etcd: LocalEtcd | None) -> Injected:
        """The fault itself."""

    def resume_point(self, checkpoint_dir: Path | None) -> int | None:
        """The newest complete checkpoint right after the fault: where the job resumes from."""
        return newest_checkpoint_step(checkpoint_dir)

    def first_report(self, last_step: int, checkpoint: int | None, injected: Injected, fired_at: float) -> DrillReport:
        return DrillReport(
            self.name, last_step, checkpoint, injected.detail, tuple(injected.killed), blocked=tuple(injected.blocked),
            fired_at=fired_at,
        )  # fmt: skip

    def after_fired(self, pods: JobPods, checkpoint_dir: Path | None) -> str:
        """What the drill does at each poll once it has fired; "" when nothing."""
        return ""

    def finish(self, pods: JobPods) -> None:  # noqa: B027 - a hook most drills leave empty
        """After the job: what the drill releases, or learns from the last attempt's logs."""

    def summary_lines(self, plan: LocalPlan) -> list[str]:
        """The drill's own lines in the run's summary, after its report and recovery."""
        return []

    def take_disrupted(self) -> set[str]:
        """The pods evicted since the last call: their failure carries the condition DisruptionTarget."""
        taken, self.disrupted = self.disrupted, set()
        return taken
