"""evict-pod: a voluntary disruption, as a drain for a node-group update or the end of a capacity block makes it.

The pod's agent gets the kubelet's SIGTERM, passes it to its workers (which settle their checkpoint) and exits 143; the
pod is created again (a PyTorchJob's ExitCode) or the gang is (a TrainJob's JobSet, the pod marked DisruptionTarget).
It fires EVICTIONS times, each once the pod is back and a newer checkpoint is complete: a disruption must not use up
the job's restarts, so a job with maxRestarts 1 survives two of them.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from local.agents import JobPods, PodPhase
from local.drills.base import Drill, DrillReport, Injected, newest_checkpoint_step
from local.etcd import LocalEtcd

EVICTIONS = 2  # one more than the restarts a job with maxRestarts 1 could spend on them


class EvictPod(Drill):
    name = "evict-pod"
    targets_pod = True
    evicted_pid: int | None = None  # the agent evicted last; the next eviction waits for another

    def inject(self, pods: JobPods, etcd: LocalEtcd | None) -> Injected:
        return Injected(self._evict(pods), [], [])

    def first_report(self, last_step: int, checkpoint: int | None, injected: Injected, fired_at: float) -> DrillReport:
        return replace(super().first_report(last_step, checkpoint, injected, fired_at), evicted_at=(checkpoint,))

    def _evict(self, pods: JobPods) -> str:
        pod = pods.pods[self.pod_index]
        self.evicted_pid = pod.process.pid if pod.process else None
        pod.terminate()
        self.disrupted.add(pod.name)
        return f"SIGTERM to {pod.name}'s agent, as the kubelet evicting it for a drain (a voluntary disruption)"

    def after_fired(self, pods: JobPods, checkpoint_dir: Path | None) -> str:
        """The next eviction, once the pod runs again (a new agent) and the job has saved a checkpoint since the last
        eviction."""
        report, pod = self.report, pods.pods[self.pod_index]
        assert report is not None
        if report.repeats >= EVICTIONS or pod.phase is not PodPhase.RUNNING or pod.process is None:
            return ""
        if pod.process.pid == self.evicted_pid or pod.process.poll() is not None:
            return ""
        checkpoint = newest_checkpoint_step(checkpoint_dir)
        if checkpoint is None or checkpoint <= (report.evicted_at[-1] or 0):
            return ""
        detail = self._evict(pods)
        self.report = replace(report, repeats=report.repeats + 1, evicted_at=(*report.evicted_at, checkpoint))
        return f"{detail} (eviction {report.repeats + 1} of {EVICTIONS})"
