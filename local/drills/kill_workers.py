"""kill-workers: the workers of one pod keep dying, as on a node whose GPU keeps failing.

Each time that pod's agent has started workers, they get SIGKILL. The agent restarts its worker group --max-restarts
times, then gives up: torchrun closes the rendezvous and the launcher exits 1, which under restartPolicy ExitCode fails
the job at once; no pod is restarted into the closed rendezvous.
"""

from __future__ import annotations

import signal
from dataclasses import replace
from pathlib import Path

from local.agents import JobPods, PodPhase
from local.drills.base import Drill, DrillReport, Injected
from local.etcd import LocalEtcd
from local.procs import Proc, process_tree, signal_all


class KillWorkers(Drill):
    name = "kill-workers"
    targets_pod = True

    def inject(self, pods: JobPods, etcd: LocalEtcd | None) -> Injected:
        killed: list[Proc] = []
        detail = self._kill_workers(pods, killed) or f"{pods.pods[self.pod_index].name} had no workers running"
        return Injected(detail, killed, [])

    def first_report(self, last_step: int, checkpoint: int | None, injected: Injected, fired_at: float) -> DrillReport:
        report = super().first_report(last_step, checkpoint, injected, fired_at)
        return report if injected.killed else replace(report, repeats=0)  # it counts rounds with victims

    def after_fired(self, pods: JobPods, checkpoint_dir: Path | None) -> str:
        assert self.report is not None
        killed: list[Proc] = []
        detail = self._kill_workers(pods, killed)
        if killed:
            report = self.report
            self.report = replace(report, killed=report.killed + tuple(killed), repeats=report.repeats + 1)
        return detail

    def _kill_workers(self, pods: JobPods, killed: list[Proc]) -> str:
        """SIGKILL the workers (and their children) of the pod's running agent, not the agent itself."""
        pod = pods.pods[self.pod_index]
        if pod.phase is not PodPhase.RUNNING or pod.process is None:
            return ""
        already = self.report.killed if self.report else ()
        workers = [proc for proc in process_tree(pod.process.pid)[1:] if proc not in already]
        signal_all(workers, signal.SIGKILL)
        killed += workers
        pids = ", ".join(str(proc.pid) for proc in workers)
        return f"SIGKILL to the workers of {pod.name} (pids {pids}); its agent lives on" if workers else ""
