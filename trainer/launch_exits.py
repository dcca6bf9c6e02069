"""The exit codes of `python -m trainer.launch`, in the two classes the Training Operator tells apart (torch-free: the
PyTorchJob manifest and the local run read them too).

A PyTorchJob's Worker replicas run with restartPolicy ExitCode (workloads/job/manifest.py). The operator,
kubeflow/trainer v1.9.4, then creates a pod again whose container exited with a code of 128 or more, and fails the whole
job on a code from 1 to 127 (pkg/util/train/train_util.go IsRetryableExitCode: `exitCode >= 128`;
pkg/controller.v1/common/pod.go ReconcilePods). The launcher maps every way torchrun can end onto one of the two
(trainer/launch.py):

| Exit | Class | When |
| --- | --- | --- |
| 0 | succeeded | the workers finished |
| 128 + N | retryable | stopped by signal N (SIGTERM: the pod deleted, evicted or drained), workers stopped first |
| 200 | retryable | the rendezvous backend (etcd) failed or was lost |
| 1 | permanent | the workers failed with torchrun's restarts spent; the rendezvous is closed; anything else |
| 2 | permanent | torchrun's parser rejected the arguments (argparse exits 2), before anything started |
"""

from __future__ import annotations

import signal

LAUNCH_MODULE = "trainer.launch"  # `python -m trainer.launch <torchrun's arguments>`
FIRST_RETRYABLE_EXIT = 128  # IsRetryableExitCode, kubeflow/trainer v1.9.4
EXIT_SUCCEEDED = 0
EXIT_PERMANENT = 1
# argparse's ArgumentParser.error exits with status 2 (Python docs, argparse); the launcher parses torchrun's arguments
# first (trainer/launch.py main), so 2 means nothing ran. A TrainJob's runtime fails the job on it alone
# (workloads/job/trainjob.py says why).
EXIT_BAD_ARGUMENTS = 2
# Retryable, and above 128 + 64 (Linux's highest signal number, SIGRTMAX; signal(7)), so that neither `kubectl
# describe pod` readers nor tools ever take it for a process killed by a signal.
EXIT_BACKEND_LOST = 200
# The launcher's last line on stderr starts with this; the local run quotes that line when a pod exits.
REASON_PREFIX = "trainer.launch: "


def exit_for_signal(signum: int) -> int:
    """The code a process ended by signal `signum` exits with, as a shell and Kubernetes report it (128 + N)."""
    return FIRST_RETRYABLE_EXIT + signum


def is_retryable(code: int) -> bool:
    """Whether the operator creates the pod again after its container exited with `code` (0 is success)."""
    return code >= FIRST_RETRYABLE_EXIT


def describe_exit(code: int) -> str:
    """`code` with what it means where it is one of the launcher's: '143 (SIGTERM)', '200 (rendezvous backend lost)'."""
    if code == EXIT_BACKEND_LOST:
        return f"{code} (rendezvous backend lost)"
    if code > FIRST_RETRYABLE_EXIT:
        try:
            return f"{code} ({signal.Signals(code - FIRST_RETRYABLE_EXIT).name})"
        except ValueError:
            pass
    return str(code)
