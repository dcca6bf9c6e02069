"""torchrun's agent, made to stop at once when a worker's exit code says no restart can help, and to spend no restart
on a peer node that left on request.

A worker (trainer/main.py) exits 3 when the checkpoint file system cannot take the next save and 2 for bad input found
after parsing (trainer/base/pod/exits.py FINAL_WORKER_EXITS). torchrun restarts a failed worker group --max-restarts
times whatever the code (torch 2.13, elastic/agent/server/api.py SimpleElasticAgent._invoke_run: a FAILED group is
restarted while _remaining_restarts > 0), and each restart reloads the model and the last checkpoint only to fail at
the same point: on a 70B job, minutes of every node per restart, before the job fails anyway.

The hook: launch_agent (torch/distributed/launcher/api.py) builds the agent itself from the module's name
`LocalElasticAgent`, so for the length of a launch that name is this subclass (as trainer/launch/rendezvous.py swaps
the rendezvous handler registry). Its _monitor_workers sees each failure first; for a final code it spends the
remaining restarts, so _invoke_run stops the workers and returns the failure, launch_agent raises ChildFailedError
and closes the rendezvous (the job is over), and the launcher exits with the worker's code (trainer/launch/launcher.py).

A node stopped by the kubelet (a drain for a node-group update, the end of a capacity block, an eviction: the pod's
SIGTERM) announces it in the round's store before its workers go (trainer/launch/rendezvous.py announce_leaving).
Where the other nodes' workers fail with it (gloo fails a collective whose peer has gone; NCCL blocks until its timeout
when the stopped pod is not back sooner), their agents would count that failure against --max-restarts, and a few
voluntary disruptions would end a healthy run. So a failure of a group whose round has a node leaving on request is
restarted without being counted.

A node whose collectives failed the fabric preflight (trainer/checks/fabric_preflight.py) is the same case seen from
both sides: its
own workers exit EXIT_BAD_NODE, which no restart on this node can change, so its agent spends the remaining restarts
as for a final code (the launcher then ends with 201, retryable, the rendezvous left open: trainer/launch/launcher.py);
the other nodes' workers exit EXIT_PEER_BAD_NODE, and their agents restart them without counting it, into a round
without the bad node.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from torch.distributed.elastic.agent.server.api import RunResult, WorkerGroup, WorkerState
from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
from torch.distributed.elastic.multiprocessing.api import _terminate_process_handler
from torch.distributed.elastic.multiprocessing.errors import ProcessFailure
from torch.distributed.elastic.rendezvous import RendezvousHandler
from torch.distributed.launcher import api as launcher_api

from trainer.base.pod.exits import EXIT_BAD_NODE, EXIT_PEER_BAD_NODE, FINAL_WORKER_EXITS, describe_exit
from trainer.launch.rendezvous import NODES_LEAVING_KEY, HeldShutdown

# The signals a pod is stopped with (the kubelet's SIGTERM) or a person stops a launch with; torchrun handles these
# two and SIGHUP, SIGQUIT by default (torch/distributed/run.py --signals-to-handle).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

log = logging.getLogger("trainer.launch")


def first_final_failure(failures: dict[int, ProcessFailure]) -> tuple[int, int] | None:
    """(global rank, exit code) of the lowest rank that exited with a code no restart on this node changes (a final
    code, or EXIT_BAD_NODE); None if none did."""
    for rank, failure in sorted(failures.items()):
        if failure.exitcode in (*FINAL_WORKER_EXITS, EXIT_BAD_NODE):
            return rank, failure.exitcode
    return None


def only_peer_bad_node(failures: dict[int, ProcessFailure]) -> bool:
    """Whether the workers stopped only because another node failed the fabric preflight: one exited
    EXIT_PEER_BAD_NODE, and the rest did too or were ended by a signal. The agent stops the workers still running at
    the first failure and records them with it (torch 2.13 elastic/multiprocessing/api.py SubprocessContext._poll:
    close(), then _capture_process_failures again), so a sibling a moment slower shows as -SIGTERM."""
    codes = [failure.exitcode for failure in failures.values()]
    return EXIT_PEER_BAD_NODE in codes and all(code == EXIT_PEER_BAD_NODE or code < 0 for code in codes)


class FinalExitsAgent(LocalElasticAgent):
    """torchrun's LocalElasticAgent, but a worker's final exit code fails the group without a restart, and a failure
    that came with a node leaving on request costs no restart."""

    # torch wraps both methods in its @prof decorator, whose type hides their signatures from the checker.
    def _start_workers(self, worker_group: WorkerGroup) -> dict[int, int]:  # pyright: ignore[reportIncompatibleVariableOverride]
        pids = super()._start_workers(worker_group)  # pyright: ignore[reportCallIssue]
        # Starting the workers (PContext.start, elastic/multiprocessing/api.py) installs torch's own handler for the
        # stop signals, in the main thread, each time; this one announces the departure first, then does the same.
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                signal.signal(signum, _announce_then_terminate(worker_group.spec.rdzv_handler))
        return pids

    def _monitor_workers(self, worker_group: WorkerGroup) -> RunResult:  # pyright: ignore[reportIncompatibleVariableOverride]
        result = super()._monitor_workers(worker_group)  # pyright: ignore[reportCallIssue]
        if result.state != WorkerState.FAILED:
            return result
        final = first_final_failure(result.failures)
        if final is not None:
            if self._remaining_restarts > 0:
                rank, code = final
                log.warning("rank %s exited %s: no restart can change that; the worker group is not restarted",
                            rank, describe_exit(code))  # fmt: skip
                self._remaining_restarts = 0
        elif only_peer_bad_node(result.failures):
            self._remaining_restarts += 1  # given back, as below
            log.warning("another node failed the fabric preflight: the workers are restarted without counting it")
        elif nodes_leaving(worker_group) > 0:
            # _invoke_run takes one restart off for this failure right after this returns; give it back first
            self._remaining_restarts += 1
            log.warning("a node of this round left on request (SIGTERM): the workers are restarted without counting it")
        return result


def _announce_then_terminate(rendezvous: RendezvousHandler) -> Callable[[int, FrameType | None], None]:
    def handle(signum: int, frame: FrameType | None) -> None:
        if isinstance(rendezvous, HeldShutdown):  # the launcher's wrapper; a plain torchrun has no announcement
            rendezvous.announce_leaving()
        _terminate_process_handler(signum, frame)  # torch's: raises SignalException, the agent stops its workers

    return handle


def nodes_leaving(worker_group: WorkerGroup) -> int:
    """How many nodes of the worker group's round announced that they were stopped; 0 if the store cannot say."""
    store = worker_group.store
    if store is None:
        return 0
    try:
        return int(store.add(NODES_LEAVING_KEY, 0))
    except Exception:  # a backend that failed is the agent's to report; here it only means "no announcement seen"
        return 0


@contextmanager
def final_worker_exits_end_the_run() -> Iterator[None]:
    """While open, torchrun's launch_agent builds a FinalExitsAgent; torch's own class is restored afterwards."""
    original = launcher_api.LocalElasticAgent
    launcher_api.LocalElasticAgent = FinalExitsAgent  # type: ignore[misc]
    try:
        yield
    finally:
        launcher_api.LocalElasticAgent = original  # type: ignore[misc]
