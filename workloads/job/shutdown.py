"""How a training pod stops, each wait inside the one around it.

Kubernetes sends SIGTERM to the container's main process, the launcher (trainer/launch/launcher.py, torchrun in that
process), and SIGKILL after the pod's terminationGracePeriodSeconds (workloads/job/pod.py). torchrun passes SIGTERM
on to its workers and kills them after its --shutdown-timeout (torch.distributed.run; 30 s unless set). The trainer then
finishes the checkpoint it is writing in the background, or abandons it after --checkpoint-stop-wait-seconds
(trainer/base/pod/shutdown.py). Each wait leaves the one around it a margin for what comes after it: the trainer's own
exit (process groups, metrics server), the launcher's (exit 143), so that neither is killed before it is done.
"""

from __future__ import annotations

# The pod's terminationGracePeriodSeconds: time for the trainer to finish writing a checkpoint when a pod is stopped
# (the kubelet's default is 30 s).
TERMINATION_GRACE_S = 120
TRAINER_EXIT_MARGIN_S = 10
AGENT_EXIT_MARGIN_S = 15


def torchrun_shutdown_timeout(grace_s: int) -> int:
    """torchrun's wait for its workers after SIGTERM, inside the pod's grace period."""
    return grace_s - AGENT_EXIT_MARGIN_S


def checkpoint_stop_wait(grace_s: int) -> int:
    """The trainer's wait for a background save after SIGTERM, inside torchrun's wait."""
    return torchrun_shutdown_timeout(grace_s) - TRAINER_EXIT_MARGIN_S
