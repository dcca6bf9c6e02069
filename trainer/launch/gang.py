"""A TrainJob's restarts of the whole gang, as JobSet numbers them: the trainer's restart count, and a bound on them.

JobSet labels every pod of its attempt with `jobset.sigs.k8s.io/restart-attempt` = its status.restarts, which each
restart of the gang raises by one, whether it counts against failurePolicy.maxRestarts or not
(kubernetes-sigs/jobset v0.12.0 pkg/controllers/jobset_controller.go labelAndAnnotateObject, failure_policy.go
failurePolicyRecreateAll). The TrainJob's runtime hands the label to the node container through the downward API
(workloads/job/trainjob.py), and the launcher reads it here:

- The workers' attempt id starts from it (trainer/base/pod/attempt.py): each gang restart meets in a fresh static
  rendezvous whose own count of starts begins again at 1, so without it the `restarts` metric of a TrainJob would
  always read 0.
- A restart the JobSet does not count (RestartJobSetAndIgnoreMaxRestarts, for a pod marked DisruptionTarget) has no
  bound of its own, and Kubernetes marks pods so on more than drains: the taint manager's eviction from a NotReady
  node, pod garbage collection, the kubelet's node-pressure eviction and graceful node shutdown. A node fault that
  recurs, or node pressure the job makes itself, would restart the gang for ever. So the runtime also gives the
  bound on restarts of any kind (job.maxRestarts + job.maxDisruptionRestarts), and a launcher whose attempt is past
  it starts nothing and exits EXIT_GANG_RESTARTS_SPENT, a final exit: the runtime's podFailurePolicy fails the Job
  and its JobSet rule finalExit the JobSet.

The variables' names are the contract in trainer/base/pod/gang_restarts.py, which the manifests and the local run share.
"""

from __future__ import annotations

from collections.abc import Mapping

from trainer.base.pod.gang_restarts import RESTART_ATTEMPT_VARIABLE, RESTART_LIMIT_VARIABLE


def gang_restarts(environ: Mapping[str, str]) -> int:
    """The restarts of the whole gang before this attempt (0 outside a TrainJob, where the label is not there)."""
    value = environ.get(RESTART_ATTEMPT_VARIABLE, "")
    return int(value) if value.strip() else 0


def restarts_spent(environ: Mapping[str, str]) -> str | None:
    """Why this attempt must not start (its restart attempt is past the bound), or None."""
    limit = environ.get(RESTART_LIMIT_VARIABLE, "")
    if not limit.strip():
        return None
    attempt = gang_restarts(environ)
    if attempt <= int(limit):
        return None
    return (
        f"the JobSet has restarted the gang {attempt} times, counted against maxRestarts or not "
        f"({RESTART_ATTEMPT_VARIABLE} from the pod's restart-attempt label), past the job's bound of {limit} "
        f"({RESTART_LIMIT_VARIABLE}: job.maxRestarts + job.maxDisruptionRestarts): a fault that keeps recurring, "
        "not a run worth restarting again"
    )
