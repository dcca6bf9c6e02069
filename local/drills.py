"""Fault drills for the local run: real faults, injected while the job trains, from the CLI or from tests.

- kill-agent:   a worker pod is lost with its node: its torchrun agent and every worker that agent started get
                SIGKILL at once (torchrun puts workers in sessions of their own, so they are found through the
                process tree, not the process group). The surviving agents' workers fail on the broken
                collective, the agents re-form the rendezvous without the lost node, within the elastic range,
                and the trainer resumes from the last checkpoint.
- kill-workers: the workers of one pod keep dying, as on a node whose GPU keeps failing: each time that pod's
                agent has started workers, they get SIGKILL. The agent restarts its worker group --max-restarts
                times, then gives up: torchrun closes the rendezvous and the launcher exits 1, which under
                restartPolicy ExitCode fails the job at once; no pod is restarted into the closed rendezvous.
- hung-peer:    a rank crashes as on a GPU node, where NCCL's peers of a crashed rank do not fail but block in the
                collective until its timeout, minutes later: its siblings in its own pod and every worker of the other
                pods. The runner first takes a duplicate of every worker's connections (local/connections.py), so
                that no death closes a socket a peer sees; then one worker of the pod (its lowest pid) gets SIGKILL.
                Every other worker's main thread stays inside its gloo collective, which never completes, with its
                other threads running: the trainer's SIGTERM watcher (trainer/base/shutdown.py) is one of them. The
                crashed pod's agent counts a restart, stops its blocked workers (SIGTERM: the watcher ends each) and
                joins a new round; the other pod's agent sees a node waiting and restarts its workers for the
                membership change without counting it; the job re-forms with the nodes' restart counts apart, so
                the workers must agree on their attempt by other means (trainer/base/attempt.py). On plain gloo
                every peer would fail at once and every count go up, which hides this. The connections are closed
                once every worker alive at the fault has exited.
- evict-pod:    a voluntary disruption, as a drain for a node-group update or the end of a capacity block makes it:
                the pod's agent gets the kubelet's SIGTERM, passes it to its workers (which settle their checkpoint)
                and exits 143; the pod is created again (a PyTorchJob's ExitCode) or the gang is (a TrainJob's
                JobSet, the pod marked DisruptionTarget). It fires EVICTIONS times, each once the pod is back and a
                newer checkpoint is complete: a disruption must not use up the job's restarts, so a job with
                maxRestarts 1 survives two of them.
- restart-etcd: the rendezvous store goes away and comes back empty, as when the platform's etcd pod is
                replaced. Every agent's next call to etcd fails; it stops its workers and the launcher exits 200
                (trainer/base/exits.py) with the rendezvous left open. restartPolicy ExitCode creates the pods
                again, they rejoin in the new etcd, and the trainer resumes from the last checkpoint.

- lost-storage: the cluster is lost with its file system, as after `pulumi destroy` (or a lost FSx): once a checkpoint
                is complete in S3 (its meta.json written), every agent and worker gets SIGKILL and the run's shared
                directories (the FSx stand-in: checkpoints, staged data) are deleted. The job is then started again
                as a new stack would start it, on fewer nodes (another world size, the same global batch): nothing
                is left but S3, and the trainer resumes from its own artifacts prefix, not from step 0 (local/run.py
                NewCluster).

- bad-node:     one node's fabric is slow, as a node with a bad link or GPU is: its pod's workers run the trainer's
                fabric preflight with each timed collective delayed (TRAINER_FAULT slow_preflight,
                trainer/base/faults.py),
                from the start, before step 1. The preflight names that node (its pairs with the other nodes are
                slow; that takes three nodes or more, one rank each here), its workers exit EXIT_BAD_NODE and its
                launcher 201; the local run taints its node and keeps the pod created again off it (local/nodes.py),
                so that pod stays Pending, and the other nodes' workers restart, uncounted, into a round without it.
                The job goes on from the last checkpoint (none yet: the preflight runs before step 1) on the nodes
                left when its elastic minimum allows, and ends saying a node is needed when it does not.

A drill fires when its trigger is met: after the first complete checkpoint (the default: the job then has
something to resume from), or once the leader has logged a given step. kill-workers then fires again each time
the pod has new workers; the others fire once.
"""

from __future__ import annotations

import re
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from local.agents import Pod, PodPhase, WorkerPods
from local.connections import HeldConnections, check_connection_holding
from local.etcd import LocalEtcd
from local.procs import Proc, process_tree, signal_all
from trainer.base.faults import FAULT_ENV, slow_preflight_fault
from trainer.checkpoint.layout import complete_checkpoints

DRILLS = ("kill-agent", "kill-workers", "hung-peer", "evict-pod", "restart-etcd", "lost-storage", "bad-node")
# Drills aimed at one worker pod (--drill-pod)
POD_DRILLS = ("kill-agent", "kill-workers", "hung-peer", "evict-pod", "bad-node")
EVICTIONS = 2  # evict-pod: one more than the restarts a job with maxRestarts 1 could spend on them
ETCD_DOWN_S = 3.0  # long enough for every agent's next keep-alive or state sync to fail
S3_POLL_S = 1.0  # how often lost-storage lists the run's checkpoints in S3 while it waits for the first
# bad-node: the delay before each of the slow node's timed preflight collectives. The CPU's gloo collectives of the
# local preflight take milliseconds, so this puts the node far below any --preflight-min-fraction.
BAD_NODE_DELAY_MS = 200
# The preflight names a node whose network is slow by its pairs with two other nodes (trainer/base/fabric.py judge):
# three nodes at least, with the one rank each that the local run gives a node.
BAD_NODE_NODES = 3
# The trainer's line when it loads a checkpoint (trainer/checkpoint/checkpointer.py restore): "resumed from <where>,
# <which tier> (saved by ...".
RESUMED_FROM = re.compile(r"resumed from (\S+), (.+?) \(saved by")


class DrillError(ValueError):
    """The drill cannot run in this setup (the message says what to change)."""


def pod_workers(pod: Pod) -> list[Proc]:
    """The processes below the pod's agent: its workers (the torch elastic agent starts each as its child)."""
    return process_tree(pod.process.pid)[1:] if pod.process is not None else []


@dataclass(frozen=True)
class Trigger:
    after_step: int | None = None  # None: after the first complete checkpoint

    def describe(self) -> str:
        return "after the first checkpoint" if self.after_step is None else f"once step {self.after_step} is logged"

    def met(self, checkpoint_dir: Path | None, last_step: int, durable: Callable[[], int | None] | None = None) -> bool:
        """`durable`: the newest complete checkpoint in S3, for a drill that waits for one there instead."""
        if self.after_step is not None:
            return last_step >= self.after_step
        if durable is not None:
            return durable() is not None
        return checkpoint_dir is not None and bool(complete_checkpoints(checkpoint_dir))


@dataclass(frozen=True)
class RunStorage:
    """What lost-storage destroys and waits for: the local directories of the pods' volumes (the shared file system)
    and the newest complete checkpoint in S3 (local/artifacts.py LocalStorage.newest_checkpoint_step)."""

    volumes: tuple[Path, ...]
    newest_durable: Callable[[], int | None]


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
        if name == "kill-agent" and (replicas < 2 or nodes.start >= replicas):
            raise DrillError(
                f"kill-agent needs the job to go on with fewer agents, but it runs {nodes.start}:{replicas}; "
                "run with --nodes 2 --min-nodes 1"
            )
        if name == "hung-peer" and replicas < 2:
            raise DrillError(f"hung-peer needs a second worker pod whose workers block, but the job runs {replicas}; "
                             "run with --nodes 2")  # fmt: skip
        if name == "lost-storage" and replicas < 2:
            raise DrillError(f"lost-storage starts the job again on fewer nodes, but it runs {replicas}; "
                             "run with --nodes 2")  # fmt: skip
        if name == "bad-node" and replicas < BAD_NODE_NODES:
            raise DrillError(f"bad-node needs the preflight to name one of {BAD_NODE_NODES} nodes or more (one rank "
                             f"each here), but the job runs {replicas}; run with --nodes {BAD_NODE_NODES}")  # fmt: skip
        if name in POD_DRILLS and not -replicas <= pod_index < replicas:
            raise DrillError(f"--drill-pod {pod_index}: the job has worker pods 0 to {replicas - 1}")
        if name == "hung-peer":
            try:
                check_connection_holding()
            except OSError as refused:
                raise DrillError(f"hung-peer keeps the workers' connections open with pidfd_getfd(2), which this "
                                 f"machine refuses ({refused}); it needs Linux 5.6 or later") from None  # fmt: skip
        self.name, self.trigger, self.pod_index = name, trigger, pod_index % max(replicas, 1)
        self.held: HeldConnections | None = None  # hung-peer: the connections kept open past the workers' deaths
        self.report: DrillReport | None = None
        self.disrupted: set[str] = set()  # evict-pod: pods evicted since the gang's last look (take_disrupted)
        self.evicted_pid: int | None = None  # evict-pod: the agent evicted last; the next eviction waits for another
        self.storage: RunStorage | None = None  # lost-storage: set by the runner once the run's storage exists
        self.log_offsets: dict[Path, int] = {}  # lost-storage: the pods' logs when it fired; the new cluster's follow
        self.listed_at = float("-inf")  # lost-storage: when it last listed the checkpoints in S3

    def describe(self, job: str) -> str:
        target = f" {job}-worker-{self.pod_index}" if self.name in POD_DRILLS else ""
        if self.name == "hung-peer":
            target += " (one worker; the others block)"
        if self.name == "bad-node":  # no trigger: the fault is in the pod's environment (agent_env)
            return f"{self.name}{target} from its start: its fabric preflight is slow"
        return f"{self.name}{target} {self.trigger.describe()}"

    def agent_env(self, pod_index: int) -> dict[str, str]:
        """What the drill adds to the environment of pod `pod_index`'s agent from its start: bad-node's slow
        preflight on its pod; nothing for the others, and for every other drill."""
        if self.name != "bad-node" or pod_index != self.pod_index:
            return {}
        return {FAULT_ENV: slow_preflight_fault(BAD_NODE_DELAY_MS)}

    def poll(self, pods: WorkerPods, etcd: LocalEtcd | None, checkpoint_dir: Path | None, last_step: int) -> str:
        """Inject the fault if it is due; returns what it did ("" when nothing). The report (`self.report`) is
        made when the drill first fires; kill-workers adds each later round of killed workers to it."""
        if self.report is not None:
            if self.name == "evict-pod":
                return self._evict_again(pods, checkpoint_dir)
            if self.held is not None and self.held.sockets and self.held.release_when_owners_are_gone():
                return f"the connections of the workers of the fault closed: all {len(self.held.owners)} have exited"
            return self._kill_workers_again(pods) if self.name == "kill-workers" else ""
        durable = self.storage.newest_durable if self.storage and self.name == "lost-storage" else None
        if durable is not None:  # a listing takes milliseconds; the runner polls ten times a second
            if time.monotonic() - self.listed_at < S3_POLL_S:
                return ""
            self.listed_at = time.monotonic()
        if self.name == "bad-node":  # its fault is in the pod's environment from the start (agent_env)
            pod = pods.pods[self.pod_index].name
            detail = f"{pod}'s preflight collectives each delayed {BAD_NODE_DELAY_MS} ms ({FAULT_ENV}), from its start"
            self.report = DrillReport(self.name, last_step, newest_checkpoint_step(checkpoint_dir), detail)
            return detail
        if not self.trigger.met(checkpoint_dir, last_step, durable):
            return ""
        killed: list[Proc] = []
        blocked: list[Proc] = []
        fired_at = time.time()
        if self.name == "kill-agent":
            detail = self._kill_agent(pods, killed)
        elif self.name == "kill-workers":
            detail = self._kill_workers(pods, killed) or f"{pods.pods[self.pod_index].name} had no workers running"
        elif self.name == "hung-peer":
            detail = self._hang_and_crash(pods, blocked, killed)
        elif self.name == "evict-pod":
            detail = self._evict(pods)
        elif self.name == "lost-storage":
            detail = self._lose_cluster(pods, killed)
        else:
            detail = self._restart_etcd(etcd)
        # lost-storage: the resume point is in S3 (its file system is gone), listed again after the kill: a checkpoint
        # may have been committed since the trigger's listing
        checkpoint = durable() if durable is not None else newest_checkpoint_step(checkpoint_dir)
        repeats = 0 if self.name == "kill-workers" and not killed else 1  # kill-workers counts rounds with victims
        evicted_at = (checkpoint,) if self.name == "evict-pod" else ()
        held = len(self.held.sockets) if self.held else 0
        self.report = DrillReport(
            self.name, last_step, checkpoint, detail, tuple(killed), repeats, tuple(blocked), evicted_at,
            fired_at=fired_at, held_connections=held,
        )  # fmt: skip
        return detail

    def _evict(self, pods: WorkerPods) -> str:
        pod = pods.pods[self.pod_index]
        self.evicted_pid = pod.process.pid if pod.process else None
        pod.terminate()
        self.disrupted.add(pod.name)
        return f"SIGTERM to {pod.name}'s agent, as the kubelet evicting it for a drain (a voluntary disruption)"

    def _evict_again(self, pods: WorkerPods, checkpoint_dir: Path | None) -> str:
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

    def finish(self, pods: WorkerPods) -> None:
        """After the job: the connections hung-peer still holds are closed, and what the drill learns from the last
        attempt's logs (lost-storage: where the new cluster's trainer resumed, from the first resume line its pods
        logged after the loss)."""
        if self.held is not None:
            self.held.release()
        if self.name != "lost-storage" or self.report is None:
            return
        for pod in pods.pods:
            if pod.log_path.exists():
                with open(pod.log_path, "rb") as log:
                    log.seek(self.log_offsets.get(pod.log_path, 0))
                    found = RESUMED_FROM.search(log.read().decode(errors="replace"))
                if found:
                    self.report = replace(self.report, resumed_from=found.group(1), resumed_tier=found.group(2))
                    return

    def take_disrupted(self) -> set[str]:
        """The pods evicted since the last call: their failure carries the condition DisruptionTarget."""
        taken, self.disrupted = self.disrupted, set()
        return taken

    def _hang_and_crash(self, pods: WorkerPods, blocked: list[Proc], killed: list[Proc]) -> str:
        """Take every running worker's connections, then SIGKILL the crashed pod's first worker: the rest block."""
        crashed = pods.pods[self.pod_index]
        if crashed.phase is not PodPhase.RUNNING or crashed.process is None:
            return f"{crashed.name} was not running; nothing done"
        workers = {pod.name: pod_workers(pod) for pod in pods.pods if pod.phase is PodPhase.RUNNING}
        if not workers.get(crashed.name):
            return f"{crashed.name} had no workers running; nothing done"
        everyone = [proc for procs in workers.values() for proc in procs]
        self.held = HeldConnections.take(everyone)
        victim = min(workers[crashed.name], key=lambda proc: proc.pid)
        signal_all([victim], signal.SIGKILL)
        killed.append(victim)
        blocked += [proc for proc in everyone if proc != victim]
        return (
            f"SIGKILL to worker {victim.pid} of {crashed.name}, its {len(self.held.sockets)} connections and every "
            f"other worker's kept open: {len(blocked)} workers left inside their collective, as NCCL leaves them"
        )

    def _kill_agent(self, pods: WorkerPods, killed: list[Proc]) -> str:
        pod = pods.pods[self.pod_index]
        if pod.phase is not PodPhase.RUNNING:
            return f"{pod.name} was no longer running ({pod.phase.value}); nothing killed"
        killed += pod.kill()
        pids = ", ".join(str(proc.pid) for proc in killed)
        return f"SIGKILL to {pod.name}: its agent and workers (pids {pids}); the pod is lost with its node"

    def _lose_cluster(self, pods: WorkerPods, killed: list[Proc]) -> str:
        """SIGKILL every pod (agents and workers, as lost nodes), then delete the shared volumes' directories."""
        for pod in pods.pods:
            if pod.phase is PodPhase.RUNNING and pod.process is not None:
                killed += pod.kill()
            self.log_offsets[pod.log_path] = pod.log_path.stat().st_size if pod.log_path.exists() else 0
        assert self.storage is not None  # the runner sets it before the pods start
        for volume in self.storage.volumes:
            shutil.rmtree(volume, ignore_errors=True)
        deleted = ", ".join(str(volume) for volume in self.storage.volumes)
        return (
            f"SIGKILL to every pod (pids {', '.join(str(proc.pid) for proc in killed)}) and the shared file system "
            f"deleted ({deleted}): the cluster is lost with its storage"
        )

    def _kill_workers(self, pods: WorkerPods, killed: list[Proc]) -> str:
        """SIGKILL the workers (and their children) of the pod's running agent, not the agent itself."""
        pod = pods.pods[self.pod_index]
        if pod.phase is not PodPhase.RUNNING or pod.process is None:
            return ""
        workers = [proc for proc in process_tree(pod.process.pid)[1:] if proc not in self.killed]
        signal_all(workers, signal.SIGKILL)
        killed += workers
        pids = ", ".join(str(proc.pid) for proc in workers)
        return f"SIGKILL to the workers of {pod.name} (pids {pids}); its agent lives on" if workers else ""

    def _kill_workers_again(self, pods: WorkerPods) -> str:
        assert self.report is not None
        killed: list[Proc] = []
        detail = self._kill_workers(pods, killed)
        if killed:
            report = self.report
            self.report = replace(report, killed=report.killed + tuple(killed), repeats=report.repeats + 1)
        return detail

    @property
    def killed(self) -> tuple[Proc, ...]:
        return self.report.killed if self.report else ()

    @staticmethod
    def _restart_etcd(etcd: LocalEtcd | None) -> str:
        assert etcd is not None  # checked in __init__
        etcd.restart(down_s=ETCD_DOWN_S)
        return f"etcd on {etcd.endpoint} stopped, down {ETCD_DOWN_S:.0f} s, started again with no data"
