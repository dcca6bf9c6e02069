"""torchrun's agent, made to stop at once when a worker's exit code says no restart can help.

A worker (trainer/main.py) exits 3 when the checkpoint file system cannot take the next save and 2 for bad input found
after parsing (trainer/launch_exits.py FINAL_WORKER_EXITS). torchrun restarts a failed worker group --max-restarts times
whatever the code (torch 2.13, elastic/agent/server/api.py SimpleElasticAgent._invoke_run: a FAILED group is
restarted while _remaining_restarts > 0), and each restart reloads the model and the last checkpoint only to fail at
the same point: on a 70B job, minutes of every node per restart, before the job fails anyway.

The hook: launch_agent (torch/distributed/launcher/api.py) builds the agent itself from the module's name
`LocalElasticAgent`, so for the length of a launch that name is this subclass (as trainer/launch_rendezvous.py swaps
the rendezvous handler registry). Its _monitor_workers sees each failure first; for a final code it spends the
remaining restarts, so _invoke_run stops the workers and returns the failure, launch_agent raises ChildFailedError
and closes the rendezvous (the job is over), and the launcher exits with the worker's code (trainer/launch.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from torch.distributed.elastic.agent.server.api import RunResult, WorkerGroup, WorkerState
from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure
from torch.distributed.launcher import api as launcher_api

from trainer.launch_exits import FINAL_WORKER_EXITS, describe_exit

log = logging.getLogger("trainer.launch")


def first_final_failure(failures: dict[int, ProcessFailure]) -> tuple[int, int] | None:
    """(global rank, exit code) of the lowest rank that exited with a final code; None if none did."""
    for rank, failure in sorted(failures.items()):
        if failure.exitcode in FINAL_WORKER_EXITS:
            return rank, failure.exitcode
    return None


def final_worker_failure(error: ChildFailedError) -> tuple[int, int] | None:
    """(global rank, exit code) of a final worker exit among the failures torchrun gave up on."""
    return first_final_failure(error.failures)


class FinalExitsAgent(LocalElasticAgent):
    """torchrun's LocalElasticAgent, but a worker's final exit code fails the group without a restart."""

    def _monitor_workers(self, worker_group: WorkerGroup) -> RunResult:
        result = super()._monitor_workers(worker_group)
        final = first_final_failure(result.failures) if result.state == WorkerState.FAILED else None
        if final is not None and self._remaining_restarts > 0:
            rank, code = final
            log.warning("rank %s exited %s: no restart can change that; the worker group is not restarted",
                        rank, describe_exit(code))  # fmt: skip
            self._remaining_restarts = 0
        return result


@contextmanager
def final_worker_exits_end_the_run() -> Iterator[None]:
    """While open, torchrun's launch_agent builds a FinalExitsAgent; torch's own class is restored afterwards."""
    original = launcher_api.LocalElasticAgent
    launcher_api.LocalElasticAgent = FinalExitsAgent  # type: ignore[misc]
    try:
        yield
    finally:
        launcher_api.LocalElasticAgent = original  # type: ignore[misc]
