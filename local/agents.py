"""The worker "pods" of the local run: one torchrun agent each, supervised the way the cluster would.

- An agent that exits is treated as the Worker replica's restartPolicy says, the pod's status read as the operator
  reads it (local/restart_policy.py container_exit: the `pytorch` container's exit code): under ExitCode, the job's
  policy, a code from 1 to 127 (the launcher's when torchrun's restarts are spent or the
  rendezvous is closed) fails the job at once, and a code from 128 up (stopped or killed by a signal, or the
  launcher's after a lost etcd; trainer/base/exits.py) gets the pod created again; under OnFailure the container
  restarts until the restarts of all pods reach backoffLimit. A restarted or re-created pod runs the same command
  and environment. Each exit is reported with the launcher's own last line, which says why it ended.
- When the job fails, the pods still running are stopped (cleanPodPolicy Running).
- A pod that a drill kills is lost with its node: it is not started again, and the job carries on with the
  agents left, within the elastic range.
- A pod whose launcher found its node bad (EXIT_BAD_NODE) taints its node (the local stand-in for the launcher's
  call to the API server, trainer/launch/node_taint.py); the pod created again has no other node to go to and stays
  Pending (local/nodes.py), and the job carries on with the agents left, or ends where its elastic minimum says a node
  is needed.
- Stopping a pod stops every process in it: the agent gets SIGTERM (torchrun forwards it to its workers, and the
  launcher exits 143) and, after a grace period, the agent and every process it ever started get SIGKILL.
"""

from __future__ import annotations

import contextlib
import enum
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from local.launch import AgentLaunch
from local.nodes import LocalNodes
from local.procs import Proc, die_with_parent, kill_tree, process_tree
from local.restart_policy import DEFAULT_CONTAINER, Action, container_exit, container_exit_code
from stack.paths import PROJECT_ROOT
from trainer.base.exits import EXIT_BAD_NODE, REASON_PREFIX
from trainer.launch.node_taint import NODE_NAME_VARIABLE, bad_node_taint

# The pod's terminationGracePeriodSeconds is 120 s, time for a large model's checkpoint; the local models save in
# well under a second, and a user who pressed Ctrl-C should not wait two minutes.
STOP_GRACE_S = 15.0
START_MARK = "--- "  # the line the local run writes into a pod's log each time it starts the pod's agent
# Reading every process's parent takes a few ms; workers start and stop rarely, and a kill or a stop reads the
# tree afresh anyway, so the pods' trees are recorded once a second rather than at every poll.
SCAN_EVERY_S = 1.0
# The pod as the local run has it: the agent is the default container, the one the operator reads exit codes from
# (local/restart_policy.py). Init containers do not run here: the local volumes are this user's directories.
AGENT_POD = {"containers": [{"name": DEFAULT_CONTAINER}]}


class PodPhase(enum.Enum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # exited, and its restartPolicy fails the job for it
    LOST = "lost"  # killed by a drill; its node is gone
    PENDING = "pending"  # created again, but no node takes it (its own is tainted; local/nodes.py)


@dataclass
class Pod:
    """One worker replica: its agent process, its log (like `kubectl logs`) and every process seen in it."""

    launch: AgentLaunch
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    phase: PodPhase = PodPhase.RUNNING
    restarts: int = 0
    seen: set[Proc] = field(default_factory=set)

    @property
    def name(self) -> str:
        return self.launch.name

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            log.write(f"{START_MARK}{time.strftime('%H:%M:%S')} start {self.name} (restart {self.restarts})\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                self.launch.argv,
                cwd=PROJECT_ROOT,
                env=self.launch.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches the runner only, which then stops each pod in order
                preexec_fn=die_with_parent,
            )
        self.phase = PodPhase.RUNNING

    def exit_code(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def launcher_line(self) -> str:
        """The launcher's last line since this pod's agent was last started: its exit and why; "" if none."""
        lines = self.log_path.read_text(errors="replace").splitlines()
        for line in reversed(lines):
            if line.startswith(REASON_PREFIX):
                return line
            if line.startswith(START_MARK):
                break
        return ""

    def remember_processes(self) -> list[Proc]:
        """The agent's current tree, added to the processes seen in this pod; workers reparented after their agent
        died are no longer in the tree, so the pod's cleanup also signals what it saw before."""
        tree = process_tree(self.process.pid) if self.process is not None else []
        self.seen.update(tree)
        return tree

    def kill(self) -> list[Proc]:
        """SIGKILL the agent and every worker it started, all at once, as a lost node would; returns the killed."""
        assert self.process is not None
        self.remember_processes()
        killed = kill_tree(self.process.pid, sorted(self.seen, key=lambda p: p.pid))
        self.process.wait()
        self.phase = PodPhase.LOST
        return killed

    def terminate(self) -> None:
        """SIGTERM the agent, as the kubelet deleting the pod: torchrun forwards it to the workers; exit 143."""
        if self.process is not None and self.process.poll() is None:
            self.remember_processes()
            self.process.send_signal(signal.SIGTERM)

    def wait(self, deadline: float) -> None:
        """Wait for the agent until `deadline` (time.monotonic), then SIGKILL whatever is left of the pod."""
        if self.process is None:
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        kill_tree(self.process.pid, list(self.seen))
        self.process.wait()


@dataclass
class PodEvent:
    pod: str
    what: str


class WorkerPods:
    """All worker pods of the job, and the job's state as the operator would report it."""

    def __init__(
        self,
        launches: list[AgentLaunch],
        log_dir: Path,
        backoff_limit: int,
        restart_policy: str,
        nodes: LocalNodes | None = None,
    ) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self.nodes = nodes  # where pods created again may go; None: anywhere
        self.pods = [Pod(launch, log_dir / f"{launch.name}.log") for launch in launches]
        self.backoff_limit = backoff_limit
        self.restart_policy = restart_policy
        self.restarts = 0  # restarts and re-creations of all pods together
        self.failure = ""  # why the job failed, once it has
        self.last_scan = 0.0

    def start(self) -> None:
        for pod in self.pods:
            pod.start()

    def poll(self) -> list[PodEvent]:
        """Note exits and act on each as the restart policy says; returns what happened."""
        events = []
        scan = time.monotonic() - self.last_scan > SCAN_EVERY_S
        if scan:
            self.last_scan = time.monotonic()
        for pod in self.pods:
            if pod.phase is not PodPhase.RUNNING or self.failure:
                continue
            if scan:
                pod.remember_processes()
            returncode = pod.exit_code()
            if returncode is None:
                continue
            events.append(self._after_exit(pod, container_exit_code(returncode)))
        return events

    def _after_exit(self, pod: Pod, code: int) -> PodEvent:
        assert pod.process is not None
        kill_tree(pod.process.pid, list(pod.seen))  # what is left of the container goes with it
        outcome = container_exit(
            self.restart_policy, AGENT_POD, DEFAULT_CONTAINER, code, self.restarts, self.backoff_limit
        )
        assert outcome is not None  # the pod's main container ended: something always follows
        launcher = pod.launcher_line()
        said = f" [{launcher}]" if launcher else ""
        if outcome.action is Action.SUCCEED:
            pod.phase = PodPhase.SUCCEEDED
            return PodEvent(pod.name, f"agent {outcome.why}")
        if outcome.action is Action.FAIL_JOB:
            pod.phase = PodPhase.FAILED
            self.failure = f"{pod.name}'s agent {outcome.why}{said}"
            return PodEvent(pod.name, f"agent {outcome.why}: the PyTorchJob failed{said}")
        self.restarts += 1
        pod.restarts += 1
        if self.nodes is not None:
            if code == EXIT_BAD_NODE:  # what the launcher asks the API server for; the local run has none
                self.nodes.taint(pod.launch.env.get(NODE_NAME_VARIABLE, ""), bad_node_taint())
            if unschedulable := self.nodes.unschedulable(pod.launch.env):
                return self._pending(pod, f"agent {outcome.why}{said}; it stays Pending: {unschedulable}")
        pod.start()
        return PodEvent(pod.name, f"agent {outcome.why} (restart {self.restarts} of the job's pods){said}")

    def _pending(self, pod: Pod, what: str) -> PodEvent:
        """The pod created again with no node to go to; the job fails when the pods left are too few to go on."""
        assert self.nodes is not None
        pod.phase = PodPhase.PENDING
        running = sum(other.phase is PodPhase.RUNNING for other in self.pods)
        if short := self.nodes.short_of(running):
            self.failure = f"{pod.name} is Pending and {short}"
            return PodEvent(pod.name, f"{what}; the job cannot go on: {short}")
        return PodEvent(pod.name, f"{what}; the job goes on with {running} node(s)")

    @property
    def finished(self) -> bool:
        """The job is over: it failed, or no pod is running any more."""
        return bool(self.failure) or all(pod.phase is not PodPhase.RUNNING for pod in self.pods)

    @property
    def succeeded(self) -> bool:
        """The job did not fail, and every pod that still has a node finished its agent with status 0."""
        remaining = [pod for pod in self.pods if pod.phase not in (PodPhase.LOST, PodPhase.PENDING)]
        return not self.failure and bool(remaining) and all(pod.phase is PodPhase.SUCCEEDED for pod in remaining)

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop every pod: all get SIGTERM at once, then share one grace period before SIGKILL."""
        for pod in self.pods:
            pod.terminate()
        deadline = time.monotonic() + grace_s
        for pod in self.pods:
            pod.wait(deadline)
