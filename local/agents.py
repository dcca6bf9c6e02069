"""The worker "pods" of the local run: one torchrun agent each, supervised the way the cluster would.

- A pod runs the container's command with its environment, in a session of its own; its output goes to its log (like
  `kubectl logs`). What follows its agent's exit is the rule of the job's controller, which each job API's local run
  gives (JobPods._after_exit): the Training Operator's for a PyTorchJob (local/pytorchjob/pods.py), the Job and
  JobSet controllers' for a TrainJob (local/trainjob/pods.py). Each exit is reported with the launcher's own last
  line, which says why it ended.
- A pod that a drill kills is lost with its node: it is not started again.
- Stopping a pod stops every process in it: the agent gets SIGTERM (torchrun forwards it to its workers, and the
  launcher exits 143) and, after a grace period, the agent and every process it ever started get SIGKILL.
"""

from __future__ import annotations

import contextlib
import enum
import signal
import subprocess
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from local.launch import AgentLaunch
from local.pod_status import container_exit_code
from local.procs import Proc, die_with_parent, kill_tree, process_tree
from stack.paths import PROJECT_ROOT
from trainer.base.pod.exits import REASON_PREFIX

# The pod's terminationGracePeriodSeconds is 120 s, time for a large model's checkpoint; the local models save in
# well under a second, and a user who pressed Ctrl-C should not wait two minutes.
STOP_GRACE_S = 15.0
START_MARK = "--- "  # the line the local run writes into a pod's log each time it starts the pod's agent
# Reading every process's parent takes a few ms; workers start and stop rarely, and a kill or a stop reads the
# tree afresh anyway, so the pods' trees are recorded once a second rather than at every poll.
SCAN_EVERY_S = 1.0


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


class JobPods(ABC):
    """All worker pods of one attempt of the job, and the job's state as its controller would report it. What follows
    an agent's exit is the controller's (`_after_exit`: each job API's local run says, local/pytorchjob/pods.py and
    local/trainjob/pods.py)."""

    def __init__(self, launches: list[AgentLaunch], log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self.pods = [Pod(launch, log_dir / f"{launch.name}.log") for launch in launches]
        self.failure = ""  # why the job failed, once it has
        self.last_scan = 0.0

    def start(self) -> None:
        for pod in self.pods:
            pod.start()

    def poll(self) -> list[PodEvent]:
        """Note exits and act on each as the controller's rule says; returns what happened."""
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

    @abstractmethod
    def _after_exit(self, pod: Pod, code: int) -> PodEvent:
        """What the controller does once `pod`'s agent exited with `code` (as Kubernetes reports it)."""

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
