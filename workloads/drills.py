"""Fault drills for the local run: real faults, injected while the job trains, from the CLI or from tests.

- kill-agent:   a worker pod is lost with its node: its torchrun agent and every worker that agent started get
                SIGKILL at once (torchrun puts workers in sessions of their own, so they are found through the
                process tree, not the process group). The surviving agents' workers fail on the broken
                collective, the agents re-form the rendezvous without the lost node, within the elastic range,
                and the trainer resumes from the last checkpoint.
- restart-etcd: the rendezvous store goes away and comes back empty, as when the platform's etcd pod is
                replaced. Agents that lose etcd exit; their pods restart (restartPolicy OnFailure), join a fresh
                rendezvous and resume from the last checkpoint.

A drill fires once, when its trigger is met: after the first complete checkpoint (the default: the job then has
something to resume from), or once the leader has logged a given step.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trainer.checkpoint_layout import complete_checkpoints
from workloads.local_agents import PodPhase, WorkerPods
from workloads.local_etcd import LocalEtcd
from workloads.local_procs import Proc

DRILLS = ("kill-agent", "restart-etcd")
ETCD_DOWN_S = 3.0  # long enough for every agent's next keep-alive or state sync to fail


class DrillError(ValueError):
    """The drill cannot run in this setup (the message says what to change)."""


@dataclass(frozen=True)
class Trigger:
    after_step: int | None = None  # None: after the first complete checkpoint

    def describe(self) -> str:
        return "after the first checkpoint" if self.after_step is None else f"once step {self.after_step} is logged"

    def met(self, checkpoint_dir: Path | None, last_step: int) -> bool:
        if self.after_step is not None:
            return last_step >= self.after_step
        return checkpoint_dir is not None and bool(complete_checkpoints(checkpoint_dir))


@dataclass(frozen=True)
class DrillReport:
    drill: str
    at_step: int  # the last step the leader had logged when the fault was injected
    checkpoint_step: int | None  # the newest complete checkpoint right after the fault: the resume point
    detail: str
    killed: tuple[Proc, ...] = ()  # kill-agent: the agent and workers that got SIGKILL


def newest_checkpoint_step(checkpoint_dir: Path | None) -> int | None:
    found = complete_checkpoints(checkpoint_dir) if checkpoint_dir else []
    return found[-1][0] if found else None


class Drill:
    """One fault, injected once its trigger is met; `poll` is called from the runner's loop."""

    def __init__(self, name: str, trigger: Trigger, nodes: range, local_etcd: bool, pod_index: int = -1) -> None:
        """Check that the drill can run here before anything starts. `nodes` is the job's elastic range (min to
        max agents); pod_index -1 is the last worker pod."""
        replicas = nodes.stop - 1
        if name not in DRILLS:
            raise DrillError(f"unknown drill {name!r}; drills: {', '.join(DRILLS)}")
        if name == "restart-etcd" and not local_etcd:
            raise DrillError("restart-etcd restarts the etcd this run started; leave out --etcd-endpoint")
        if name == "kill-agent":
            if replicas < 2 or nodes.start >= replicas:
                raise DrillError(
                    f"kill-agent needs the job to go on with fewer agents, but it runs {nodes.start}:{replicas}; "
                    "run with --nodes 2 --min-nodes 1"
                )
            if not -replicas <= pod_index < replicas:
                raise DrillError(f"--drill-pod {pod_index}: the job has worker pods 0 to {replicas - 1}")
        self.name, self.trigger, self.pod_index = name, trigger, pod_index % max(replicas, 1)
        self.report: DrillReport | None = None

    def describe(self, job: str) -> str:
        target = f" {job}-worker-{self.pod_index}" if self.name == "kill-agent" else ""
        return f"{self.name}{target} {self.trigger.describe()}"

    def poll(
        self, pods: WorkerPods, etcd: LocalEtcd | None, checkpoint_dir: Path | None, last_step: int
    ) -> DrillReport | None:
        """Inject the fault if it is due; returns its report the one time it fires."""
        if self.report is not None or not self.trigger.met(checkpoint_dir, last_step):
            return None
        killed: list[Proc] = []
        detail = self._kill_agent(pods, killed) if self.name == "kill-agent" else self._restart_etcd(etcd)
        checkpoint = newest_checkpoint_step(checkpoint_dir)
        self.report = DrillReport(self.name, last_step, checkpoint, detail, tuple(killed))
        return self.report

    def _kill_agent(self, pods: WorkerPods, killed: list[Proc]) -> str:
        pod = pods.pods[self.pod_index]
        if pod.phase is not PodPhase.RUNNING:
            return f"{pod.name} was no longer running ({pod.phase.value}); nothing killed"
        killed += pod.kill()
        pids = ", ".join(str(proc.pid) for proc in killed)
        return f"SIGKILL to {pod.name}: its agent and workers (pids {pids}); the pod is lost with its node"

    @staticmethod
    def _restart_etcd(etcd: LocalEtcd | None) -> str:
        assert etcd is not None  # checked in __init__
        etcd.restart(down_s=ETCD_DOWN_S)
        return f"etcd on {etcd.endpoint} stopped, down {ETCD_DOWN_S:.0f} s, started again with no data"
