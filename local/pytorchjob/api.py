"""A stack's job as a kubeflow.org/v1 PyTorchJob on this machine, as the Training Operator v1.9.4 would run it.

The PyTorchJob is rendered by the stack's own builder (workloads/job/pytorchjob.py) from the stack's config with the
local changes (local/config.py) and admitted as the operator's webhook admits it (webhook.py). A local etcd plays the
platform's (local/etcd.py); one torchrun agent per worker replica runs the container's command with its environment
and the operator's PET_* variables (launch.py), supervised with the operator's restart rule (pods.py): each pod
restarted or created again on its own, the others re-forming the elastic rendezvous.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from local.api import AdmittedJob, JobChange, LocalJobApi
from local.drills.registry import DRILLS
from local.etcd import free_port
from local.launch import LocalPlan, ManifestError, WorkerOptions
from local.modelled_fields import UnmodelledFieldError
from local.options import LocalJobOptions, LocalRunError
from local.pytorchjob.launch import local_plan
from local.pytorchjob.pods import PodRestarts, nodes_for
from local.pytorchjob.webhook import AdmissionDeniedError, admit_pytorchjob
from local.restart_rule import RestartRule
from stack.config import JobConfig, StackConfig
from stack.job_api import PYTORCHJOB, rendezvous_backend
from workloads.job.pytorchjob import pytorchjob_manifest
from workloads.job.spec import job_spec


class PyTorchJobLocal(LocalJobApi):
    """The Training Operator's PyTorchJob: an elastic rendezvous on the platform's etcd, each pod restarted alone."""

    name = PYTORCHJOB
    drills = tuple(DRILLS.values())
    elastic = True  # torchrun's elastic range: the job goes on with fewer agents
    manifest_file = "pytorchjob.yaml"

    def job_changes(self, job: JobConfig, options: LocalJobOptions) -> list[JobChange]:
        """The platform's etcd for the rendezvous: a local etcd plays it."""
        stack = rendezvous_backend(job.api, job.rdzv_backend)
        return [JobChange("rdzvBackend", stack, "etcd", "the local run's rendezvous is a local etcd")]

    def admitted(self, config: StackConfig) -> AdmittedJob:
        """The stack's PyTorchJob, admitted as the Training Operator's webhook admits it (webhook.py)."""
        manifest = pytorchjob_manifest(job_spec(config))
        try:
            admit_pytorchjob(manifest)
        except (AdmissionDeniedError, UnmodelledFieldError) as refused:
            raise LocalRunError(f"{manifest['metadata']['name']}: {refused}") from None
        policy = manifest["spec"]["elasticPolicy"]
        nodes = range(policy["minReplicas"], policy["maxReplicas"] + 1)
        return AdmittedJob(manifest["metadata"]["name"], (manifest,), nodes)

    def plan(
        self,
        job: AdmittedJob,
        work_dir: Path,
        etcd_endpoint: str | None,
        stand_ins: dict[str, str],
        workers: WorkerOptions,
    ) -> LocalPlan:
        (manifest,) = job.objects
        assert etcd_endpoint is not None  # the platform runs etcd for a PyTorchJob (workloads/job/api.py)
        try:
            return local_plan(manifest, work_dir, etcd_endpoint, free_port(), stand_ins, workers)
        except ManifestError as error:
            raise LocalRunError(f"the stack's manifest: {error}") from None

    def describe(self, stack: str, job: AdmittedJob, plan: LocalPlan, etcd_endpoint: str | None) -> list[str]:
        nproc, here = plan.cluster_nproc_per_node, plan.nproc_per_node
        reduced = "" if nproc == here else f" (nprocPerNode is {nproc} on the cluster, one per GPU; {here} here)"
        return [
            f"local run of stack {stack}: PyTorchJob {plan.job}, {plan.replicas} worker replica(s) -> "
            f"{plan.replicas} torchrun agent(s) with {here} worker process(es) each{reduced}",
            f"  rendezvous: etcd-v2 at {etcd_endpoint}, id {plan.rendezvous_id}",
        ]

    def restart_rule(self, job: AdmittedJob, echo: Callable[[str], None]) -> RestartRule:
        (manifest,) = job.objects
        return PodRestarts(nodes_for(manifest))
