"""A stack's job as a Kubeflow Trainer v2 TrainJob on this machine (`python -m local --api trainjob`).

The TrainJob and its runtime are rendered by the stack's own builders (workloads/job/trainjob.py) from the stack's
config with the local changes (local/config.py). One torchrun agent per node runs the TrainJob's command with Trainer
v2's PET_* variables (launch.py): torchrun's static rendezvous on node 0, here 127.0.0.1. No etcd.

Before anything starts, the two objects go through the cluster's admission as modelled from the webhooks' sources
(admission.py: Trainer v2's webhooks, JobSet's on the JobSet Trainer would build, the Job API's on each child Job); a
refusal ends the run with the webhook's message, as it would leave the cluster's TrainJob idle.

The agents are supervised as the Job and JobSet controllers would (pods.py): a failed pod fails the attempt, and the
runtime's policies fail the JobSet or start the whole gang again. Every process started here is stopped on success,
failure and Ctrl-C (local/run.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from local.api import AdmittedJob, JobChange, LocalJobApi
from local.drills.evict_pod import EvictPod
from local.drills.hung_peer import HungPeer
from local.drills.kill_agent import KillAgent
from local.drills.kill_workers import KillWorkers
from local.etcd import free_port
from local.launch import LocalPlan, ManifestError, WorkerOptions
from local.modelled_fields import UnmodelledFieldError
from local.options import LocalJobOptions, LocalOptions, LocalRunError
from local.restart_rule import RestartRule
from local.trainjob.admission import AdmissionError, admit
from local.trainjob.jobset_policy import trainer_job
from local.trainjob.launch import trainjob_plan
from local.trainjob.pod_failure_policy import DEFAULT_BACKOFF_LIMIT
from local.trainjob.pods import GangRestarts
from stack.config import JobConfig, StackConfig
from stack.job_api import TRAINJOB
from workloads.job.spec import job_spec
from workloads.job.trainjob import training_runtime, trainjob_manifest


class TrainJobLocal(LocalJobApi):
    """Trainer v2's TrainJob on JobSet: a static rendezvous, the gang restarted whole after a failure."""

    name = TRAINJOB
    # Drills that make sense without etcd: a lost node, and a node whose workers keep dying.
    drills = (KillAgent, KillWorkers, HungPeer, EvictPod)
    elastic = False  # a TrainJob goes on at full size after its gang restart
    manifest_file = "trainjob.yaml"

    def job_changes(self, job: JobConfig, options: LocalJobOptions) -> list[JobChange]:
        """The PyTorchJob's options of a stack run here as a TrainJob (--api trainjob): torchrun's static rendezvous,
        locally too, and no elastic range (unless --min-nodes asks for one, which the stack then refuses)."""
        changes = [JobChange("rdzvBackend", job.rdzv_backend, None, "a TrainJob rendezvouses statically")]
        if options.min_nodes is None:
            changes.append(JobChange("minNodes", job.min_nodes, None, "a TrainJob has no elastic range"))
        return changes

    def refuse_options(self, options: LocalOptions) -> None:
        if options.etcd_port or options.etcd_endpoint:
            raise LocalRunError("--etcd-port and --etcd-endpoint are the PyTorchJob's: a TrainJob runs no etcd")

    def refuse_drill(self, name: str) -> None:
        if name not in {drill.name for drill in self.drills}:
            names = ", ".join(drill.name for drill in self.drills)
            raise LocalRunError(f"--drill {name}: a TrainJob has no etcd; its drills are {names}")

    def admitted(self, config: StackConfig) -> AdmittedJob:
        spec = job_spec(config)
        runtime, trainjob = training_runtime(spec), trainjob_manifest(spec)
        try:
            admit(runtime, trainjob)
        except AdmissionError as refused:
            raise LocalRunError(f"the cluster would not run the stack's TrainJob: {refused}") from None
        except UnmodelledFieldError as unmodelled:
            raise LocalRunError(f"the stack's TrainJob: {unmodelled}") from None
        # A drill's node range is the elastic range a PyTorchJob may go on in; a TrainJob goes on at full size after
        # its gang restart, so every count from 1 to its nodes is one the job survives to.
        return AdmittedJob(spec.name, (runtime, trainjob), range(1, spec.nodes + 1))

    def plan(
        self,
        job: AdmittedJob,
        work_dir: Path,
        etcd_endpoint: str | None,
        stand_ins: dict[str, str],
        workers: WorkerOptions,
    ) -> LocalPlan:
        runtime, trainjob = job.objects
        try:
            return trainjob_plan(
                runtime, trainjob, work_dir, free_port(), free_port(), stand_ins=stand_ins, workers=workers
            )
        except ManifestError as error:
            raise LocalRunError(f"the stack's TrainJob: {error}") from None

    def describe(self, stack: str, job: AdmittedJob, plan: LocalPlan, etcd_endpoint: str | None) -> list[str]:
        return [
            f"local run of stack {stack}: TrainJob {plan.job}, {plan.replicas} node(s) -> {plan.replicas} "
            f"torchrun agent(s) with {plan.nproc_per_node} worker process(es) each (numProcPerNode is "
            f"{plan.cluster_nproc_per_node} on the cluster, one per GPU)",
            f"  rendezvous: {plan.rendezvous_id}, node 0 (Trainer v2's PET_MASTER_ADDR)",
        ]

    def rule_lines(self, job: AdmittedJob) -> list[str]:
        """How Trainer v2, JobSet and the Job API admitted the job, and the runtime's rules after a failure."""
        return [
            "  admitted as Trainer v2, JobSet and the Job API would; after a failure, the runtime's rules:",
            *(f"    {line}" for line in describe_policy(job.objects[0])),
        ]

    def restart_rule(self, job: AdmittedJob, echo: Callable[[str], None]) -> RestartRule:
        runtime, trainjob = job.objects
        return GangRestarts((runtime, trainjob), echo)


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
