"""The variables that give the launcher a TrainJob's gang restarts: the pod's restart attempt and the bound on it.

The TrainJob's runtime sets them in the node container (workloads/job/trainjob.py gang_restart_env): the attempt from
the pod's `jobset.sigs.k8s.io/restart-attempt` label through the downward API, the bound as job.maxRestarts +
job.maxDisruptionRestarts. The launcher reads them (trainer/launch/gang.py), and so does the local run of a TrainJob
(local/trainjob/launch.py).
"""

from __future__ import annotations

RESTART_ATTEMPT_VARIABLE = "JOBSET_RESTART_ATTEMPT"
RESTART_LIMIT_VARIABLE = "FSDP_EKS_MAX_GANG_RESTARTS"
