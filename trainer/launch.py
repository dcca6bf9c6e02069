"""`python -m trainer.launch <torchrun's arguments>`: torchrun, run in this process as the pod's main process, ending
with an exit code the Training Operator reads right (the codes: trainer/launch_exits.py).

    python -m trainer.launch --nnodes=2:4 --nproc-per-node=8 --rdzv-backend=etcd-v2 --rdzv-endpoint=HOST:2379 \\
        --rdzv-id=JOB --max-restarts=3 --shutdown-timeout=105 -m trainer --model ...

torchrun on its own (torch.distributed.run.main) ends every failure with an uncaught exception, exit 1, which
restartPolicy ExitCode takes for a permanent one. The ways it ends, read in torch 2.13, and what the launcher makes
of them:
- SIGTERM or SIGINT: torchrun's handler raises SignalException (elastic/multiprocessing/api.py,
  _terminate_process_handler; the launcher installs the same from its start, so a signal during the first
  rendezvous counts too); the agent passes the signal to its workers and kills them only after --shutdown-timeout
  (elastic/agent/server/api.py SimpleElasticAgent.run, local_elastic_agent.py _shutdown), so the trainer settles
  its checkpoint; launch_agent leaves the rendezvous open (launcher/api.py). -> 128 + the signal, retryable: a
  deleted, evicted or drained pod is created again and rejoins.
- A lost or failing rendezvous backend: the etcd-v2 backend turns every etcd error into RendezvousConnectionError
  (elastic/rendezvous/etcd_rendezvous_backend.py: EtcdRendezvousBackend.get_state, set_state, _create_etcd_client),
  the agent's store lets python-etcd's EtcdException through (etcd_store.py EtcdStore), the c10d backend raises
  RendezvousConnectionError too (c10d_rendezvous_backend.py _call_store). The agent stops its workers (SIGTERM
  first) and raises. -> 200, retryable, and the rendezvous stays open (trainer/launch_rendezvous.py says why).
- The workers failed with --max-restarts spent: launch_agent raises ChildFailedError and closes the rendezvous.
  -> 1, permanent: the job fails, and no pod is created again into the closed rendezvous.
- The rendezvous is closed (RendezvousClosedError: another agent gave up, or the job finished). -> 1, permanent.
- Anything else (a rendezvous that timed out waiting for --nnodes, a corrupt rendezvous state, a bug). -> 1.
Bad arguments end as torchrun's parser ends them (exit 2). The last line on stderr gives the exit and its reason.
"""

from __future__ import annotations

import signal
import sys
import traceback
from dataclasses import dataclass
from types import FrameType

from torch.distributed import run as torchrun
from torch.distributed.elastic.multiprocessing import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.elastic.rendezvous import RendezvousClosedError, RendezvousConnectionError

from trainer.launch_exits import (
    EXIT_BACKEND_LOST,
    EXIT_PERMANENT,
    EXIT_SUCCEEDED,
    REASON_PREFIX,
    describe_exit,
    exit_for_signal,
    is_retryable,
)
from trainer.launch_rendezvous import held_rendezvous_shutdowns

# The signals a pod is stopped with (the kubelet's SIGTERM) or a person stops a launch with; torchrun handles these
# two and SIGHUP, SIGQUIT by default (torch/distributed/run.py --signals-to-handle).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _backend_errors() -> tuple[type[BaseException], ...]:
    try:
        from etcd import EtcdException  # python-etcd: the etcd-v2 backend's client (requirements-trainer.txt)
    except ModuleNotFoundError:  # without it torch cannot reach etcd at all, and raises nothing of it
        return (RendezvousConnectionError,)
    return (RendezvousConnectionError, EtcdException)


BACKEND_ERRORS = _backend_errors()


@dataclass(frozen=True)
class Ending:
    """How a launch ended: the exit code, why, and whether the rendezvous may be closed (where torch closes it)."""

    code: int
    reason: str
    closes_rendezvous: bool

    def line(self) -> str:
        kind = "retryable" if is_retryable(self.code) else "succeeded" if self.code == EXIT_SUCCEEDED else "permanent"
        return f"{REASON_PREFIX}exit {describe_exit(self.code)}, {kind}: {self.reason}"


def _one_line(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    if error.__cause__ is not None:
        text += f" <- {type(error.__cause__).__name__}: {error.__cause__}"
    return " ".join(text.split())


def _first_failure(error: ChildFailedError) -> str:
    rank, failure = error.get_first_failure()
    how = f"signal {failure.signal_name()}" if failure.exitcode < 0 else f"exit code {failure.exitcode}"
    return f"rank {rank}, {how}"


def ending(error: BaseException | None) -> Ending:
    """The exit for torchrun's end: None when it returned, else what it raised."""
    if error is None:
        return Ending(EXIT_SUCCEEDED, "the workers finished", closes_rendezvous=True)
    if isinstance(error, SignalException):
        name = signal.Signals(error.sigval).name
        reason = f"stopped by {name}; the workers got it first, with --shutdown-timeout to finish"
        return Ending(exit_for_signal(error.sigval), reason, closes_rendezvous=False)
    if isinstance(error, ChildFailedError):
        first = _first_failure(error)
        reason = f"the workers failed and --max-restarts is spent (ChildFailedError, first failure {first})"
        return Ending(EXIT_PERMANENT, reason, closes_rendezvous=True)
    if isinstance(error, RendezvousClosedError):
        reason = "the rendezvous is closed: another agent gave up, or the job finished (RendezvousClosedError)"
        return Ending(EXIT_PERMANENT, reason, closes_rendezvous=True)
    if isinstance(error, BACKEND_ERRORS):
        reason = f"the rendezvous backend failed; left open for the pods created again ({_one_line(error)})"
        return Ending(EXIT_BACKEND_LOST, reason, closes_rendezvous=False)
    return Ending(EXIT_PERMANENT, f"torchrun failed ({_one_line(error)})", closes_rendezvous=True)


def _raise_signal_exception(signum: int, frame: FrameType | None) -> None:
    raise SignalException(f"Process got signal: {signal.Signals(signum).name}", sigval=signal.Signals(signum))


def main(argv: list[str] | None = None) -> int:
    """Run torchrun with `argv` (default: this process's arguments); returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    torchrun.parse_args(argv)  # --help, and bad arguments (exit 2), end here as in torchrun (its main would hide the 0)
    for signum in STOP_SIGNALS:
        signal.signal(signum, _raise_signal_exception)
    error: BaseException | None = None
    with held_rendezvous_shutdowns() as handlers:
        try:
            torchrun.main(argv)
        except BaseException as caught:  # every way out gets an exit code
            error = caught
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)  # the way out is decided; a late signal must not change it
        end = ending(error)
        for handler in handlers:
            handler.finish(close=end.closes_rendezvous)
    if error is not None and not isinstance(error, SignalException):
        traceback.print_exception(error)
    print(end.line(), file=sys.stderr, flush=True)
    return end.code


if __name__ == "__main__":
    sys.exit(main())
