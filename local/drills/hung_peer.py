"""hung-peer: a rank crashes as on a GPU node, where NCCL's peers of a crashed rank do not fail but block.

They block in the collective until its timeout, minutes later: its siblings in its own pod and every worker of the other
pods. The runner first takes a duplicate of every worker's connections (local/connections.py), so that no death closes a
socket a peer sees; then one worker of the pod (its lowest pid) gets SIGKILL. Every other worker's main thread stays
inside its gloo collective, which never completes, with its other threads running: the trainer's SIGTERM watcher
(trainer/base/pod/shutdown.py) is one of them. The crashed pod's agent counts a restart, stops its blocked workers
(SIGTERM: the watcher ends each) and joins a new round; the other pod's agent sees a node waiting and restarts its
workers for the membership change without counting it; the job re-forms with the nodes' restart counts apart, so the
workers must agree on their attempt by other means (trainer/base/pod/attempt.py). On plain gloo every peer would fail at
once and every count go up, which hides this. The connections are closed once every worker alive at the fault has
exited.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from local.agents import JobPods, PodPhase
from local.connections import HeldConnections, check_connection_holding
from local.drills.base import Drill, DrillError, DrillReport, Injected, pod_workers
from local.etcd import LocalEtcd
from local.procs import Proc, signal_all


class HungPeer(Drill):
    name = "hung-peer"
    targets_pod = True
    held: HeldConnections | None = None  # the connections kept open past the workers' deaths

    def check_job(self, nodes: range, replicas: int, local_etcd: bool, elastic: bool) -> None:
        if replicas < 2:
            raise DrillError(f"{self.name} needs a second worker pod whose workers block, but the job runs {replicas}; "
                             "run with --nodes 2")  # fmt: skip

    def check_machine(self) -> None:
        try:
            check_connection_holding()
        except OSError as refused:
            raise DrillError(f"{self.name} keeps the workers' connections open with pidfd_getfd(2), which this "
                             f"machine refuses ({refused}); it needs Linux 5.6 or later") from None  # fmt: skip

    def target(self, pods: Sequence[str]) -> str:
        return f"{super().target(pods)} (one worker; the others block)"

    def inject(self, pods: JobPods, etcd: LocalEtcd | None) -> Injected:
        """Take every running worker's connections, then SIGKILL the crashed pod's first worker: the rest block."""
        crashed = pods.pods[self.pod_index]
        if crashed.phase is not PodPhase.RUNNING or crashed.process is None:
            return Injected(f"{crashed.name} was not running; nothing done", [], [])
        workers = {pod.name: pod_workers(pod) for pod in pods.pods if pod.phase is PodPhase.RUNNING}
        if not workers.get(crashed.name):
            return Injected(f"{crashed.name} had no workers running; nothing done", [], [])
        everyone = [proc for procs in workers.values() for proc in procs]
        self.held = HeldConnections.take(everyone)
        victim = min(workers[crashed.name], key=lambda proc: proc.pid)
        signal_all([victim], signal.SIGKILL)
        blocked: list[Proc] = [proc for proc in everyone if proc != victim]
        return Injected(
            f"SIGKILL to worker {victim.pid} of {crashed.name}, its {len(self.held.sockets)} connections and every "
            f"other worker's kept open: {len(blocked)} workers left inside their collective, as NCCL leaves them",
            [victim],
            blocked,
        )

    def first_report(self, last_step: int, checkpoint: int | None, injected: Injected, fired_at: float) -> DrillReport:
        report = super().first_report(last_step, checkpoint, injected, fired_at)
        return replace(report, held_connections=len(self.held.sockets) if self.held else 0)

    def after_fired(self, pods: JobPods, checkpoint_dir: Path | None) -> str:
        if self.held is not None and self.held.sockets and self.held.release_when_owners_are_gone():
            return f"the connections of the workers of the fault closed: all {len(self.held.owners)} have exited"
        return ""

    def finish(self, pods: JobPods) -> None:
        if self.held is not None:
            self.held.release()
