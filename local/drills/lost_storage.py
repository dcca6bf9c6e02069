"""lost-storage: the cluster is lost with its file system, as after `pulumi destroy` (or a lost FSx).

Once a checkpoint is complete in S3 (its meta.json written), every agent and worker gets SIGKILL and the run's shared
directories (the FSx stand-in: checkpoints, staged data) are deleted. The job is then started again as a new stack
would start it, on fewer nodes (another world size, the same global batch): nothing is left but S3, and the trainer
resumes from its own artifacts prefix, not from step 0 (NewCluster).
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable, Set
from dataclasses import dataclass, replace
from pathlib import Path

from local.agents import JobPods, PodPhase
from local.artifacts import LocalStorage
from local.drills.base import Drill, DrillError, Injected, newest_checkpoint_step
from local.etcd import LocalEtcd
from local.launch import LocalPlan
from local.options import LocalJobOptions
from local.procs import Proc
from local.restart_rule import AfterFailure, RestartRule
from trainer.base.s3.uri import is_s3_uri

S3_POLL_S = 1.0  # how often it lists the run's checkpoints in S3 while it waits for the first
# The trainer's line when it loads a checkpoint (trainer/checkpoint/checkpointer.py restore): "resumed from <where>,
# <which tier> (saved by ...".
RESUMED_FROM = re.compile(r"resumed from (\S+), (.+?) \(saved by")


@dataclass(frozen=True)
class RunStorage:
    """What lost-storage destroys and waits for: the local directories of the pods' volumes (the shared file system)
    and the newest complete checkpoint in S3 (local/artifacts.py LocalStorage.newest_checkpoint_step)."""

    volumes: tuple[Path, ...]
    newest_durable: Callable[[], int | None]


class LostStorage(Drill):
    name = "lost-storage"
    storage: RunStorage | None = None  # set once the run's storage exists (attach_storage)
    listed_at = float("-inf")  # when it last listed the checkpoints in S3

    @staticmethod
    def job_defaults(job: LocalJobOptions, elastic: bool) -> LocalJobOptions:
        """A cluster to replace with a smaller one: two agents."""
        return replace(job, nodes=job.nodes or 2)

    def check_job(self, nodes: range, replicas: int, local_etcd: bool, elastic: bool) -> None:
        if replicas < 2:
            raise DrillError(f"{self.name} starts the job again on fewer nodes, but it runs {replicas}; "
                             "run with --nodes 2")  # fmt: skip

    def attach_storage(self, plan: LocalPlan, storage: LocalStorage) -> None:
        """What it destroys and waits for: the plan's volumes and the run's checkpoints in S3."""
        uri = plan.trainer.artifacts.uri
        if not is_s3_uri(uri):
            raise DrillError(f"--drill {self.name}: the job writes no artifacts to S3 (no --artifacts-uri)")
        assert uri is not None
        self.storage = RunStorage(plan.volumes, lambda: storage.newest_checkpoint_step(uri))
        self.log_offsets: dict[Path, int] = {}  # the pods' logs when it fired; the new cluster's follow

    def restart_rule(
        self, rule: RestartRule, new_plan: Callable[[], LocalPlan], echo: Callable[[str], None]
    ) -> RestartRule:
        return NewCluster(self, rule, new_plan, echo)

    def due(self, checkpoint_dir: Path | None, last_step: int) -> bool:
        if self.storage is None:
            return super().due(checkpoint_dir, last_step)
        # A listing takes milliseconds, and the run polls ten times a second: list once a second (S3_POLL_S).
        if time.monotonic() - self.listed_at < S3_POLL_S:
            return False
        self.listed_at = time.monotonic()
        return self.trigger.met(checkpoint_dir, last_step, self.storage.newest_durable)

    def inject(self, pods: JobPods, etcd: LocalEtcd | None) -> Injected:
        """SIGKILL every pod (agents and workers, as lost nodes), then delete the shared volumes' directories."""
        killed: list[Proc] = []
        for pod in pods.pods:
            if pod.phase is PodPhase.RUNNING and pod.process is not None:
                killed += pod.kill()
            self.log_offsets[pod.log_path] = pod.log_path.stat().st_size if pod.log_path.exists() else 0
        assert self.storage is not None  # the runner sets it before the pods start
        for volume in self.storage.volumes:
            shutil.rmtree(volume, ignore_errors=True)
        deleted = ", ".join(str(volume) for volume in self.storage.volumes)
        detail = (
            f"SIGKILL to every pod (pids {', '.join(str(proc.pid) for proc in killed)}) and the shared file system "
            f"deleted ({deleted}): the cluster is lost with its storage"
        )
        return Injected(detail, killed, [])

    def resume_point(self, checkpoint_dir: Path | None) -> int | None:
        """In S3 (its file system is gone), listed again after the kill: a checkpoint may have been committed since
        the trigger's listing."""
        return self.storage.newest_durable() if self.storage else newest_checkpoint_step(checkpoint_dir)

    def finish(self, pods: JobPods) -> None:
        """Where the new cluster's trainer resumed: the first resume line its pods logged after the loss."""
        if self.report is None:
            return
        for pod in pods.pods:
            if pod.log_path.exists():
                with open(pod.log_path, "rb") as log:
                    log.seek(self.log_offsets.get(pod.log_path, 0))
                    found = RESUMED_FROM.search(log.read().decode(errors="replace"))
                if found:
                    self.report = replace(self.report, resumed_from=found.group(1), resumed_tier=found.group(2))
                    return

    def summary_lines(self, plan: LocalPlan) -> list[str]:
        assert self.report is not None
        report = self.report
        resumed = f"{report.resumed_from}, {report.resumed_tier}" if report.resumed_from else "nothing (step 0)"
        return [f"new cluster: {plan.replicas} node(s), resumed from {resumed}"]


class NewCluster:
    """lost-storage's second half, around the API's own rule: once the drill has lost the cluster with its file
    system, the job is started again on a new cluster (`new_plan`: another node count, nothing on disk), as a new
    stack's job would start, with only S3 left to resume from. Any other failure is the API's rule's to answer."""

    def __init__(
        self, drill: LostStorage, rule: RestartRule, new_plan: Callable[[], LocalPlan], echo: Callable[[str], None]
    ) -> None:
        self.drill, self.rule, self.new_plan, self.echo = drill, rule, new_plan, echo
        self.chart_title = rule.chart_title
        self.started_again = False

    def pods(self, plan: LocalPlan, log_dir: Path) -> JobPods:
        return self.rule.pods(plan, log_dir)

    def after_failure(self, pods: JobPods, plan: LocalPlan, disrupted: Set[str]) -> AfterFailure:
        if self.drill.report is None or self.started_again:
            return self.rule.after_failure(pods, plan, disrupted)
        self.started_again = True
        new = self.new_plan()
        self.echo(
            f"[drill] a new cluster: {new.replicas} node(s) instead of {plan.replicas}, an empty file system; the job "
            f"starts again with {new.trainer.artifacts.uri} in S3"
        )
        return AfterFailure(new)

    def pod_restarts(self, pods: JobPods, plan: LocalPlan) -> int:
        return self.rule.pod_restarts(pods, plan)
