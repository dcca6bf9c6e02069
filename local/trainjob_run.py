"""One local run of a stack's job as a Kubeflow Trainer v2 TrainJob (`python -m local --api trainjob`).

The TrainJob and its runtime are rendered by the stack's own builders (workloads/job/trainjob.py) from the stack's
config with the local changes (local/config.py). One torchrun agent per node runs the TrainJob's command with Trainer
v2's PET_* variables (local/trainjob_launch.py): torchrun's static rendezvous on node 0, here 127.0.0.1. No etcd.

Before anything starts, the two objects go through the cluster's admission as modelled from the webhooks' sources
(local/trainjob_admission.py: Trainer v2's webhooks, JobSet's on the JobSet Trainer would build, the Job API's on
each child Job); a refusal ends the run with the webhook's message, as it would leave the cluster's TrainJob idle.

The agents are supervised as the Job and JobSet controllers would: the pods failed by the time the attempt stops
are read as the Job controller reads them (the runtime's pod with its init containers exited 0 and the node
container's exit code; a pod lost with its node has no condition) and local/jobset_policy.py applies the runtime's
podFailurePolicy and JobSet failurePolicy to them: the JobSet fails, or stops every pod and starts them all again,
a fresh static rendezvous, counted against maxRestarts or not. The trainer resumes from its last checkpoint. Every
process started here is stopped on success, failure and Ctrl-C.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Collection
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from local.agents import Pod, PodEvent, PodPhase, WorkerPods
from local.drills import Drill, DrillError
from local.etcd import free_port
from local.jobset_policy import GangOutcome, JobSetRestarts, Verdict, gang_outcome, trainer_job
from local.launch import LocalPlan, ManifestError
from local.modelled_fields import UnmodelledFieldError
from local.pod_failure_policy import DEFAULT_BACKOFF_LIMIT, DISRUPTION_TARGET, FailedPod, pod_exit
from local.procs import kill_tree
from local.restart_policy import container_exit_code
from local.run import (
    AfterFailure,
    LocalOptions,
    LocalResult,
    LocalRunError,
    local_config,
    shorter_paths,
    start_storage,
    supervise,
    worker_options,
)
from local.trainjob_admission import AdmissionError, admit
from local.trainjob_launch import NODE, trainjob_plan, with_gang_restart
from stack.paths import PROJECT_ROOT
from workloads.job.spec import job_spec
from workloads.job.trainjob import training_runtime, trainjob_manifest

Objects = tuple[dict[str, Any], dict[str, Any]]  # the ClusterTrainingRuntime and the TrainJob
# Drills that make sense without etcd: a lost node, and a node whose workers keep dying.
GANG_DRILLS = ("kill-agent", "kill-workers", "hung-peer", "evict-pod")


class GangPods(WorkerPods):
    """The TrainJob's pods of one JobSet attempt: an exit other than 0 fails the pod's Job at once, and with it this
    attempt; what follows is the JobSet's to decide (GangRestarts)."""

    def _after_exit(self, pod: Pod, code: int) -> PodEvent:
        assert pod.process is not None
        kill_tree(pod.process.pid, list(pod.seen))  # what is left of the container goes with it
        launcher = pod.launcher_line()
        said = f" [{launcher}]" if launcher else ""
        if code == 0:
            pod.phase = PodPhase.SUCCEEDED
            return PodEvent(pod.name, "agent exited 0")
        pod.phase = PodPhase.FAILED
        self.failure = f"{pod.name}'s agent exited {code}{said}"
        return PodEvent(pod.name, f"agent exited {code}: its Job failed (restartPolicy Never, backoffLimit 0){said}")


def failed_pods(
    pods: WorkerPods,
    runtime: dict[str, Any],
    namespace: str,
    disrupted: Collection[str] = (),
) -> list[FailedPod]:
    """The attempt's failed pods as the Job controller finds them: the runtime's pod, its init containers exited 0
    (they do not run here) and its node container with the agent's exit code; a pod lost with its node first (it
    was killed first), then the others that failed. A pod in `disrupted` (evicted by the evict-pod drill, as a
    drain evicts it) carries the condition DisruptionTarget=True, which the kubelet's eviction and the API server's
    eviction sets on it."""
    pod_spec = trainer_job(runtime)["template"]["spec"]
    return [
        pod_exit(
            pod_spec,
            pod.name,
            namespace,
            NODE,
            container_exit_code(pod.process.returncode),
            conditions=((DISRUPTION_TARGET, "True"),) if pod.name in disrupted else (),
        )
        for phase in (PodPhase.LOST, PodPhase.FAILED)
        for pod in pods.pods
        if pod.phase is phase and pod.process is not None and pod.process.returncode is not None
    ]


def describe_policy(runtime: dict[str, Any]) -> list[str]:
    """The runtime's failure rules in a line each, for the run's header."""
    jobset = runtime["spec"]["template"]["spec"].get("failurePolicy")
    job = trainer_job(runtime)
    lines = [f"Job: backoffLimit {job.get('backoffLimit', DEFAULT_BACKOFF_LIMIT)}"]
    for index, rule in enumerate(job.get("podFailurePolicy", {}).get("rules", [])):
        on = rule.get("onExitCodes")
        when = (
            f"container {on.get('containerName', 'any')} exit {on['operator']} {on['values']}"
            if on
            else "condition " + ", ".join(f"{c['type']}={c['status']}" for c in rule.get("onPodConditions", []))
        )
        lines.append(f"podFailurePolicy rule {index}: {when} -> {rule['action']}")
    if jobset is None:
        return [*lines, "JobSet: no failurePolicy, the first failed Job fails it"]
    lines.append(f"JobSet: maxRestarts {jobset.get('maxRestarts', 0)}, default action RestartJobSet")
    lines += [f"JobSet rule {rule['name']}: {rule['action']}" for rule in jobset.get("rules", [])]
    return lines


def jobset_outcome(
    pods: WorkerPods,
    objects: Objects,
    restarts: JobSetRestarts,
    disrupted: Collection[str] = (),
) -> GangOutcome:
    """What the Job and JobSet controllers do about the attempt's failed pods (`disrupted`: those evicted)."""
    runtime, trainjob = objects
    failed = failed_pods(pods, runtime, trainjob["metadata"]["namespace"], disrupted)
    if not failed:
        raise LocalRunError(
            f"{trainjob['metadata']['name']}: the gang stopped with no pod failed and not all succeeded"
        )
    outcome = gang_outcome(runtime, failed, restarts)
    if outcome.verdict is Verdict.REPLACE_POD:  # no rule of ours ignores a failure; a static group could not take it
        raise LocalRunError(f"{outcome.why}: replacing one pod of a static rendezvous is not modelled here")
    names = ", ".join(f"{pod.name} ({pod.containers[0].exit_code})" for pod in failed)
    return dataclasses.replace(outcome, why=f"{names} failed; {outcome.why}")


def gang_drill(options: LocalOptions, nodes: int) -> Drill | None:
    if not options.drill:
        return None
    if options.drill not in GANG_DRILLS:
        raise LocalRunError(f"--drill {options.drill}: a TrainJob has no etcd; its drills are {', '.join(GANG_DRILLS)}")
    if options.drill == "kill-agent" and nodes < 2:
        raise LocalRunError("--drill kill-agent needs a second node to survive the kill; run with --nodes 2")
    try:
        # Drill's node range is the elastic range a PyTorchJob may go on in; a TrainJob goes on at full size after
        # its gang restart, so every count from 1 to `nodes` is one the job survives to.
        return Drill(options.drill, options.trigger, range(1, nodes + 1), local_etcd=False, pod_index=options.drill_pod)
    except DrillError as error:
        raise LocalRunError(str(error)) from None


def run_trainjob_local(options: LocalOptions) -> LocalResult:
    """Run the TrainJob to the end; raises LocalRunError for bad input before anything is started."""
    if options.etcd_port or options.etcd_endpoint:
        raise LocalRunError("--etcd-port and --etcd-endpoint are the PyTorchJob's: a TrainJob runs no etcd")
    if options.drill == "kill-agent" and options.job.nodes is None:
        options = replace(options, job=replace(options.job, nodes=2))
    config, overrides = local_config(options)
    spec = job_spec(config)
    runtime, trainjob = training_runtime(spec), trainjob_manifest(spec)
    try:
        admit(runtime, trainjob)
    except AdmissionError as refused:
        raise LocalRunError(f"the cluster would not run the stack's TrainJob: {refused}") from None
    except UnmodelledFieldError as unmodelled:
        raise LocalRunError(f"the stack's TrainJob: {unmodelled}") from None
    drill = gang_drill(options, spec.nodes)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    work_dir = (options.work_dir or PROJECT_ROOT / "runs" / "local" / f"{spec.name}-{stamp}").resolve()
    (work_dir / "logs").mkdir(parents=True, exist_ok=True)
    (work_dir / "trainjob.yaml").write_text(yaml.safe_dump_all([runtime, trainjob], sort_keys=False))
    storage, s3_lines = start_storage(options, config)
    try:
        try:
            plan = trainjob_plan(
                runtime,
                trainjob,
                work_dir,
                free_port(),
                free_port(),
                stand_ins=storage.container_environment(),
                workers=worker_options(options),
            )
        except ManifestError as error:
            raise LocalRunError(f"the stack's TrainJob: {error}") from None
        options.echo(header(options, plan, runtime, [o.describe() for o in overrides], work_dir, s3_lines))
        if drill:
            options.echo(f"  drill: {drill.describe(plan.job).replace('-worker-', '-node-0-')}")
        rule = GangRestarts((runtime, trainjob), options.echo)
        return supervise(options, plan, rule, drill, work_dir, storage=storage)
    finally:
        storage.stop()


def header(
    options: LocalOptions,
    plan: LocalPlan,
    runtime: dict[str, Any],
    overrides: list[str],
    work_dir: Path,
    s3: list[str],
) -> str:
    lines = [
        f"local run of stack {options.stack}: TrainJob {plan.job}, {plan.replicas} node(s) -> {plan.replicas} "
        f"torchrun agent(s) with {plan.nproc_per_node} worker process(es) each (numProcPerNode is "
        f"{plan.cluster_nproc_per_node} on the "
        "cluster, one per GPU)",
        f"  rendezvous: {plan.rendezvous_id}, node 0 (Trainer v2's PET_MASTER_ADDR)",
        *(f"  {line}" for line in s3),
        f"  artifacts: {plan.trainer.artifacts.uri or 'none (no --artifacts-uri)'}",
        "  admitted as Trainer v2, JobSet and the Job API would; after a failure, the runtime's rules:",
        *(f"    {line}" for line in describe_policy(runtime)),
        f"  rank 0's Prometheus metrics: http://{plan.trainer.metrics.host}:{plan.trainer.metrics.port}/metrics",
        f"  files: {work_dir}",
        "  changed for this machine:",
        *(f"    {line}" for line in [*overrides, *plan.changes]),
    ]
    return shorter_paths("\n".join(lines), work_dir)


class GangRestarts:
    """JobSet's rule for a TrainJob: a failed pod fails its Job and the attempt (GangPods); the runtime's policies then
    fail the JobSet or start every pod again, a fresh static rendezvous on a new master port, counted against
    maxRestarts or not (jobset_outcome)."""

    chart_title = "(local TrainJob)"

    def __init__(self, objects: Objects, echo: Callable[[str], None]) -> None:
        self.objects = objects
        self.echo = echo
        self.restarts = JobSetRestarts()

    def pods(self, plan: LocalPlan, log_dir: Path) -> WorkerPods:
        pods = GangPods(plan.agents, log_dir, plan.backoff_limit, plan.restart_policy)
        for pod in pods.pods:
            pod.restarts = self.restarts.restarts  # the JobSet's restart attempt, in the start line of each pod's log
        return pods

    def after_failure(self, pods: WorkerPods, plan: LocalPlan, drill: Drill | None) -> AfterFailure:
        outcome = jobset_outcome(pods, self.objects, self.restarts, drill.take_disrupted() if drill else set())
        self.echo(f"[jobset] {outcome.why}")
        if outcome.verdict is not Verdict.RESTART:
            return AfterFailure(None, outcome.why)
        self.restarts = outcome.restarts
        return AfterFailure(with_gang_restart(plan, free_port(), self.restarts.restarts))

    def pod_restarts(self, pods: WorkerPods, plan: LocalPlan) -> int:
        return self.restarts.restarts * plan.replicas  # each JobSet restart creates every pod again
