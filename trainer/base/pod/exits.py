"""The exit codes of `python -m trainer.launch`, in the two classes the Training Operator tells apart (torch-free: the
PyTorchJob manifest and the local run read them too).

A PyTorchJob's Worker replicas run with restartPolicy ExitCode (workloads/job/pytorchjob.py). The operator,
kubeflow/trainer v1.9.4, then creates a pod again whose container exited with a code of 128 or more, and fails the whole
job on a code from 1 to 127 (pkg/util/train/train_util.go IsRetryableExitCode: `exitCode >= 128`;
pkg/controller.v1/common/pod.go ReconcilePods). The launcher maps every way torchrun can end onto one of the two
(trainer/launch/launcher.py):

| Exit | Class | When |
| --- | --- | --- |
| 0 | succeeded | the workers finished |
| 128 + N | retryable | stopped by signal N (SIGTERM: the pod deleted, evicted or drained), workers stopped first |
| 200 | retryable | the rendezvous backend (etcd) failed or was lost |
| 201 | retryable | this node's collectives failed the fabric preflight (trainer/checks/fabric_preflight.py): the |
|     |           | pod is created again, and must land on another node (the node's taint); the other nodes |
|     |           | restart their workers |
| 202 | retryable | the rendezvous timed out (too few nodes joined within its join timeout, or the round's store |
|     |           | gave no attempt id): the rendezvous is left open for the pods created again |
| 1 | permanent | the workers failed with torchrun's restarts spent; the rendezvous is closed; anything else |
| 2 | permanent | torchrun's parser rejected the arguments (argparse exits 2), before anything started |
| 2 | permanent | a worker found bad input after parsing (trainer/main.py); torchrun restarts no worker for it |
| 3 | permanent | a worker found the checkpoint file system full (trainer/base/checkpoint/space.py): no restart |
|   |           | cures it, so torchrun restarts no worker for it either (trainer/launch/agent.py) |
| 4 | permanent | staging the inputs failed (the launcher's --stage-inputs, trainer/base/pod/staging.py): a gated |
|   |           | model without a token, a missing data set, an unwritable run directory |
| 6 | permanent | a TrainJob's gang was restarted more times than its bound (trainer/launch/gang.py), uncounted |
|   |           | restarts included; nothing was started |

Codes 2, 3, 4 and 6 are final on both job APIs (FINAL_EXITS): the PyTorchJob fails on any code from 1 to 127, and the
TrainJob's runtime fails its JobSet on these (workloads/job/trainjob.py) instead of restarting the gang.

A bad node (201, EXIT_BAD_NODE) is the one retryable exit that a worker chooses: its workers exit 201, the node's agent
spends no restart on it (the same node would fail the same way) and the launcher ends with 201 without closing the
rendezvous, so the job goes on without the node; the other nodes' workers exit EXIT_PEER_BAD_NODE, which their agents
restart without counting it against --max-restarts (trainer/launch/agent.py), into a round without the bad node.
"""

from __future__ import annotations

import signal

LAUNCH_MODULE = "trainer.launch"  # `python -m trainer.launch <torchrun's arguments>`
FIRST_RETRYABLE_EXIT = 128  # IsRetryableExitCode, kubeflow/trainer v1.9.4
EXIT_SUCCEEDED = 0
EXIT_PERMANENT = 1
# argparse's ArgumentParser.error exits with status 2 (Python docs, argparse); the launcher parses torchrun's arguments
# first (trainer/launch/launcher.py main), so 2 means nothing ran. A TrainJob's runtime fails the job on it alone
# (workloads/job/trainjob.py says why).
EXIT_BAD_ARGUMENTS = 2
# Input found wrong after parsing: a worker's invalid combination of flags (trainer/main.py), a `python -m sizing`
# question it cannot answer. The same code as argparse's, so that 2 always means "the input is wrong, running it again
# will not help".
EXIT_BAD_INPUT = EXIT_BAD_ARGUMENTS
# A worker (trainer/main.py) and then the launcher end with 3 when the checkpoint file system cannot take the next
# checkpoint: a retry would reload the model only to fail at the same save.
EXIT_NO_SPACE = 3
# Staging the inputs (trainer/stage.py) failed for good: a gated hub model without a token, a data set that is not
# there. Its own code, so that the pod's status names the cause instead of "bad arguments".
EXIT_STAGING_FAILED = 4
# A TrainJob's JobSet restarted the gang past the job's bound on restarts of any kind (trainer/launch/gang.py): the
# launcher starts nothing. Not 5, which is a worker's code (EXIT_PEER_BAD_NODE, below).
EXIT_GANG_RESTARTS_SPENT = 6
# The exits after which nothing is retried, on either API.
FINAL_EXITS = (EXIT_BAD_ARGUMENTS, EXIT_NO_SPACE, EXIT_STAGING_FAILED, EXIT_GANG_RESTARTS_SPENT)
# Every code the launcher ends with for a failure that a new pod cannot cure: what the operator must answer by failing
# the job (local/pytorchjob/restart_policy.py recreation_loops checks every rendered PyTorchJob for it).
PERMANENT_EXITS = (EXIT_PERMANENT, *FINAL_EXITS)
# A worker's (trainer/main.py) exit codes that no restart of the worker group can change: bad input found after
# parsing (EXIT_BAD_INPUT, 2) and a checkpoint file system too full for the next save (3). torchrun spends none of
# its --max-restarts on them; the launcher ends with the worker's code (trainer/launch/agent.py).
FINAL_WORKER_EXITS = (EXIT_BAD_ARGUMENTS, EXIT_NO_SPACE)
# Retryable, and above 128 + 64 (Linux's highest signal number, SIGRTMAX; signal(7)), so that neither `kubectl
# describe pod` readers nor tools ever take it for a process killed by a signal.
EXIT_BACKEND_LOST = 200
# This node's collectives ran below --preflight-min-fraction of the expected or the median node's bus bandwidth
# (trainer/checks/fabric_preflight.py): a worker's code, and then the launcher's. Retryable (>= 128), so the operator
# creates the pod
# again, and neither a signal's code (above 128 + SIGRTMAX) nor EXIT_BACKEND_LOST. The node's agent restarts no
# worker for it, and the launcher leaves the rendezvous open for the job's other nodes (trainer/launch/launcher.py).
EXIT_BAD_NODE = 201
# The rendezvous did not complete within its timeout: too few nodes joined (a lost node's replacement still Pending),
# or node 0 never wrote the workers' attempt id (trainer/launch/rendezvous.py). Retryable, the rendezvous left open:
# a slow replacement must not fail a 16-node job for good. The cost: a job short of nodes for good is never failed
# by it, and holds the nodes it has until it is deleted (docs/job.md).
EXIT_RENDEZVOUS_TIMEOUT = 202
# A worker's code only: another node failed the preflight, so this one's workers stop to re-form the job without it.
# Its agent restarts them without counting a restart (trainer/launch/agent.py); the launcher never ends with it.
EXIT_PEER_BAD_NODE = 5
# The launcher's last line on stderr starts with this; the local run quotes that line when a pod exits.
REASON_PREFIX = "trainer.launch: "


def exit_for_signal(signum: int) -> int:
    """The code a process ended by signal `signum` exits with, as a shell and Kubernetes report it (128 + N)."""
    return FIRST_RETRYABLE_EXIT + signum


def is_retryable(code: int) -> bool:
    """Whether the operator creates the pod again after its container exited with `code` (0 is success)."""
    return code >= FIRST_RETRYABLE_EXIT


EXIT_MEANINGS = {
    EXIT_BACKEND_LOST: "rendezvous backend lost",
    EXIT_BAD_NODE: "bad node: fabric preflight",
    EXIT_RENDEZVOUS_TIMEOUT: "rendezvous timed out",
    EXIT_PEER_BAD_NODE: "another node failed the fabric preflight",
    EXIT_NO_SPACE: "checkpoint storage full",
    EXIT_STAGING_FAILED: "staging failed",
    EXIT_GANG_RESTARTS_SPENT: "gang restarts spent",
}


def describe_exit(code: int) -> str:
    """`code` with what it means where it is one of the launcher's: '143 (SIGTERM)', '200 (rendezvous backend lost)'."""
    if code in EXIT_MEANINGS:
        return f"{code} ({EXIT_MEANINGS[code]})"
    if code > FIRST_RETRYABLE_EXIT:
        try:
            return f"{code} ({signal.Signals(code - FIRST_RETRYABLE_EXIT).name})"
        except ValueError:
            pass
    return str(code)
