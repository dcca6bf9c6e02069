"""kill-agent: a worker pod is lost with its node.

Its torchrun agent and every worker that agent started get SIGKILL at once (torchrun puts workers in sessions of their
own, so they are found through the process tree, not the process group). The surviving agents' workers fail on the
broken collective, the agents re-form the rendezvous without the lost node, within the elastic range, and the trainer
resumes from the last checkpoint. A TrainJob's JobSet instead starts the whole gang again.
"""

from __future__ import annotations

from dataclasses import replace

from local.agents import JobPods, PodPhase
from local.drills.base import Drill, DrillError, Injected
from local.etcd import LocalEtcd
from local.options import LocalJobOptions
from local.procs import Proc


class KillAgent(Drill):
    name = "kill-agent"
    targets_pod = True

    @staticmethod
    def job_defaults(job: LocalJobOptions, elastic: bool) -> LocalJobOptions:
        """A survivor: two agents unless told otherwise, elastic down to one where the job is elastic."""
        if elastic:
            return replace(job, nodes=job.nodes or 2, min_nodes=job.min_nodes or 1)
        return job if job.nodes is not None else replace(job, nodes=2)

    def check_job(self, nodes: range, replicas: int, local_etcd: bool, elastic: bool) -> None:
        if not elastic and replicas < 2:
            raise DrillError(f"--drill {self.name} needs a second node to survive the kill; run with --nodes 2")
        if elastic and (replicas < 2 or nodes.start >= replicas):
            raise DrillError(
                f"{self.name} needs the job to go on with fewer agents, but it runs {nodes.start}:{replicas}; "
                "run with --nodes 2 --min-nodes 1"
            )

    def inject(self, pods: JobPods, etcd: LocalEtcd | None) -> Injected:
        pod = pods.pods[self.pod_index]
        if pod.phase is not PodPhase.RUNNING:
            return Injected(f"{pod.name} was no longer running ({pod.phase.value}); nothing killed", [], [])
        killed: list[Proc] = pod.kill()
        pids = ", ".join(str(proc.pid) for proc in killed)
        return Injected(f"SIGKILL to {pod.name}: its agent and workers (pids {pids}); the pod is lost with its node",
                        killed, [])  # fmt: skip
