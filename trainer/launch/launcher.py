"""`python -m trainer.launch [--stage-inputs] <torchrun's arguments>`: torchrun, run in this process as the pod's main
process, ending with an exit code the Training Operator reads right (the codes: trainer/base/pod/exits.py).

    python -m trainer.launch --stage-inputs --nnodes=2:4 --nproc-per-node=8 --rdzv-backend=etcd-v2 \\
        --rdzv-endpoint=HOST:2379 --rdzv-id=JOB --max-restarts=3 --shutdown-timeout=105 -m trainer --model ...

First, where the pod names a Secrets Manager secret (HF_TOKEN_SECRET), the launcher reads the Hugging Face token
from it into HF_TOKEN for the staging child alone (trainer/base/pod/hub_token.py): the workers run offline on what
staging downloaded, and never see it (keep_token_from_workers; only a launch without --stage-inputs hands it to them).
A secret it cannot read ends the launcher with 4 (EXIT_STAGING_FAILED), naming the secret and AWS's error.

--stage-inputs, the launcher's own option, stages the trainer's inputs first (`python -m trainer.stage` with the
flags after `-m trainer`; trainer/base/pod/staging.py says why here and not in an init container). A staging failure
ends the launcher with 4 (EXIT_STAGING_FAILED; 2 where the trainer's parser refused its flags) before any
rendezvous, the reason on the last line.

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
  first) and raises. -> 200, retryable, and the rendezvous stays open (trainer/launch/rendezvous.py says why).
- The workers failed with --max-restarts spent: launch_agent raises ChildFailedError and closes the rendezvous.
  -> 1, permanent: the job fails, and no pod is created again into the closed rendezvous.
- The rendezvous is closed (RendezvousClosedError: another agent gave up, or the job finished). -> 1, permanent.
- A worker exited with a code no restart can change (FINAL_WORKER_EXITS: 2, bad input; 3, checkpoint storage full):
  the agent spends no restart on it and stops at once (trainer/launch/agent.py); launch_agent raises
  ChildFailedError and closes the rendezvous. -> the worker's code, permanent: the job is over.
- This node failed the fabric preflight (a worker exited EXIT_BAD_NODE, trainer/checks/fabric_preflight.py): the agent
spends no
  restart on it, as for a final code; launch_agent raises ChildFailedError. -> 201, retryable, the rendezvous left
  open: the operator creates the pod again (on another node: the bad node's taint keeps it off), and the job's other
  nodes, whose workers torchrun restarts without counting, go on without this one or wait for its new pod.
- The rendezvous timed out (RendezvousTimeoutError: fewer than --nnodes' minimum joined within join_timeout, a lost
  node's replacement still Pending; or the round's store gave no attempt id, trainer/launch/rendezvous.py). -> 202,
  retryable, the rendezvous left open: the pod is created again and waits anew.
- Anything else (a corrupt rendezvous state, a bug). -> 1.
Before any of it, a TrainJob's pod whose JobSet has restarted the gang past the job's bound starts nothing
(trainer/launch/gang.py) -> 6, permanent.
Bad arguments end as torchrun's parser ends them (exit 2). The last line on stderr gives the exit and its reason.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from types import FrameType

from torch.distributed import run as torchrun
from torch.distributed.elastic.multiprocessing import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.elastic.rendezvous import (
    RendezvousClosedError,
    RendezvousConnectionError,
    RendezvousTimeoutError,
)

from trainer.base.hardware.fabric import node_name
from trainer.base.pod.exits import (
    EXIT_BACKEND_LOST,
    EXIT_BAD_ARGUMENTS,
    EXIT_BAD_NODE,
    EXIT_GANG_RESTARTS_SPENT,
    EXIT_PERMANENT,
    EXIT_RENDEZVOUS_TIMEOUT,
    EXIT_STAGING_FAILED,
    EXIT_SUCCEEDED,
    REASON_PREFIX,
    describe_exit,
    exit_for_signal,
    is_retryable,
)
from trainer.base.pod.hub_token import TOKEN_VARIABLE, HubTokenError, load_hub_token
from trainer.base.pod.staging import STAGE_INPUTS_OPTION, Staged, split_launcher_options, stage_inputs, trainer_flags
from trainer.launch.agent import STOP_SIGNALS, final_worker_exits_end_the_run, first_final_failure
from trainer.launch.gang import restarts_spent
from trainer.launch.node_taint import taint_own_node
from trainer.launch.rendezvous import held_rendezvous_shutdowns


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
        final = first_final_failure(error.failures)
        if final is not None and final[1] == EXIT_BAD_NODE:
            reason = (
                f"this node ({node_name()}) failed the fabric preflight (rank {final[0]} exited "
                f"{describe_exit(EXIT_BAD_NODE)}): no restart was spent on it and the rendezvous is left open for the "
                "job's other nodes"
            )
            return Ending(EXIT_BAD_NODE, reason, closes_rendezvous=False)
        if final is not None:
            rank, code = final
            reason = (
                f"rank {rank} exited {describe_exit(code)}, which no restart can change: no restart was spent on it "
                "and the rendezvous is closed"
            )
            return Ending(code, reason, closes_rendezvous=True)
        first = _first_failure(error)
        reason = f"the workers failed and --max-restarts is spent (ChildFailedError, first failure {first})"
        return Ending(EXIT_PERMANENT, reason, closes_rendezvous=True)
    if isinstance(error, RendezvousClosedError):
        reason = "the rendezvous is closed: another agent gave up, or the job finished (RendezvousClosedError)"
        return Ending(EXIT_PERMANENT, reason, closes_rendezvous=True)
    if isinstance(error, RendezvousTimeoutError):
        reason = (
            "the rendezvous timed out (too few nodes joined in its join timeout, or no attempt id was agreed); left "
            f"open for the pods created again ({_one_line(error)})"
        )
        return Ending(EXIT_RENDEZVOUS_TIMEOUT, reason, closes_rendezvous=False)
    if isinstance(error, BACKEND_ERRORS):
        reason = f"the rendezvous backend failed; left open for the pods created again ({_one_line(error)})"
        return Ending(EXIT_BACKEND_LOST, reason, closes_rendezvous=False)
    return Ending(EXIT_PERMANENT, f"torchrun failed ({_one_line(error)})", closes_rendezvous=True)


def _raise_signal_exception(signum: int, frame: FrameType | None) -> None:
    raise SignalException(f"Process got signal: {signal.Signals(signum).name}", sigval=signal.Signals(signum))


def staging_ending(staged: Staged) -> Ending | None:
    """The exit after staging (None when it succeeded and torchrun may start): every failure is final, as no new pod
    would find the model, the token or the data set any different."""
    if staged.returncode == 0:
        return None
    said = f": {staged.last_line}" if staged.last_line else ""
    if staged.returncode == EXIT_BAD_ARGUMENTS:
        return Ending(EXIT_BAD_ARGUMENTS, f"the trainer's parser refused its flags while staging{said}", False)
    if staged.returncode < 0:
        how = f"was killed by {signal.Signals(-staged.returncode).name} (the container's memory limit?)"
    else:
        how = f"exited {staged.returncode}"
    return Ending(
        EXIT_STAGING_FAILED, f"staging the inputs failed for good (python -m trainer.stage {how}){said}", False
    )


def hub_token_ending(environ: MutableMapping[str, str]) -> Ending | None:
    """Read the Hugging Face token into `environ` where the pod names its secret (None: read, or none named). A
    secret that cannot be read is final, as no new pod would read it any different: the job fails once, before any
    GPU work."""
    try:
        load_hub_token(environ)
    except HubTokenError as error:
        return Ending(EXIT_STAGING_FAILED, str(error), closes_rendezvous=False)
    return None


def keep_token_from_workers(staging: Mapping[str, str], staged: bool) -> None:
    """The token where only the processes that download see it. With staging, that is the staging child alone: the
    workers run offline on what it staged (trainer/base/pod/staging.py), so this process's environment, which torchrun's
    workers inherit, loses the token, also one the container was given directly (the local run's). Without staging,
    the workers download for themselves and get it."""
    if staged:
        os.environ.pop(TOKEN_VARIABLE, None)
    elif staging.get(TOKEN_VARIABLE):
        os.environ[TOKEN_VARIABLE] = staging[TOKEN_VARIABLE]


def stage_then_launch(argv: list[str], stage: bool) -> tuple[Ending, BaseException | None]:
    """Read the token, stage the trainer's inputs when asked, then run torchrun; how it ended, and what was raised
    (None if nothing)."""
    args = torchrun.parse_args(argv)  # --help, bad arguments (exit 2) end here as in torchrun (its main hides the 0)
    flags = trainer_flags(args.module, args.training_script, args.training_script_args)
    if stage and flags is None:
        reason = f"{STAGE_INPUTS_OPTION} stages the trainer's inputs: the command must run `-m trainer`"
        return Ending(EXIT_BAD_ARGUMENTS, reason, closes_rendezvous=False), None
    spent = restarts_spent(os.environ)
    if spent is not None:  # before the token, staging and any rendezvous: nothing of this attempt starts
        return Ending(EXIT_GANG_RESTARTS_SPENT, spent, closes_rendezvous=False), None
    staging = dict(os.environ)  # the token goes here, for staging; the workers get it only without staging
    token_end = hub_token_ending(staging)
    if token_end is not None:
        return token_end, None
    for signum in STOP_SIGNALS:
        signal.signal(signum, _raise_signal_exception)
    if stage and flags is not None:
        try:
            staged = stage_inputs(flags, staging)
        except SignalException as stopped:  # before any rendezvous: nothing to leave open or close
            name = signal.Signals(stopped.sigval).name
            reason = f"stopped by {name} while staging the inputs, which was stopped first"
            return Ending(exit_for_signal(stopped.sigval), reason, closes_rendezvous=False), stopped
        end = staging_ending(staged)
        if end is not None:
            return end, None
    keep_token_from_workers(staging, staged=stage)
    error: BaseException | None = None
    with held_rendezvous_shutdowns() as handlers, final_worker_exits_end_the_run():
        try:
            torchrun.main(argv)
        except BaseException as caught:  # every way out gets an exit code
            error = caught
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)  # the way out is decided; a late signal must not change it
        end = ending(error)
        if end.code == EXIT_BAD_NODE:  # before the pod ends: its new pod must find the node tainted
            print(f"node taint: {taint_own_node()}", file=sys.stderr, flush=True)
        for handler in handlers:
            handler.finish(close=end.closes_rendezvous)
    return end, error


def main(argv: list[str] | None = None) -> int:
    """Run torchrun with `argv` (default: this process's arguments), after the launcher's own options; returns the
    exit code."""
    options, argv = split_launcher_options(sys.argv[1:] if argv is None else argv)
    end, error = stage_then_launch(argv, options.stage_inputs)
    if error is not None and not isinstance(error, SignalException):
        traceback.print_exception(error)
    print(end.line(), file=sys.stderr, flush=True)
    return end.code
