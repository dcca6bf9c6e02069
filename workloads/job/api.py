"""The job API as one seam: everything that differs between a PyTorchJob and a TrainJob, behind one interface.

`job_api_for(job.api)` chooses the implementation once; the render CLI, the job and platform components, the
reviewer's summary and the local runner ask it instead of comparing job.api themselves (the local run's own part per
API, its controllers' admission and restart rules, is local/apis.py's):

- the custom resources to register, in order, with what each waits for (`custom_resources`), and from them every
  object the render CLI prints (`objects`);
- the worker pod, and the object that holds it for the policy pack (`pod_owner`);
- the labels of the leader pod, global rank 0 (`leader_labels`);
- the platform parts the job needs (`platform`: its controller, and whether torchrun's rendezvous needs etcd).

stack/job_api.py holds what sits below the workloads: the config values, kinds and API versions, the rendezvous each
runs and the options only the PyTorchJob has.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from stack.job_api import PYTORCHJOB, TRAINJOB, leader_labels
from workloads.job.node_access import node_access_objects
from workloads.job.pod import namespace_manifest, service_account_manifest, with_artifacts_bucket
from workloads.job.pytorchjob import pytorchjob_manifest, with_image
from workloads.job.spec import JobSpec
from workloads.job.trainjob import node_pod_template, training_runtime, trainjob_manifest, with_trainjob_image


class Controller(enum.Enum):
    """The platform's controller for the job's custom resources (workloads/platform/component.py installs it)."""

    TRAINING_OPERATOR = "training-operator"  # Kubeflow Training Operator v1: PyTorchJob
    TRAINER_V2 = "trainer-v2"  # Kubeflow Trainer v2 with JobSet: ClusterTrainingRuntime and TrainJob


@dataclass(frozen=True)
class PlatformParts:
    """What the platform installs for a job of this API."""

    controller: Controller
    etcd: bool  # the store of torchrun's elastic rendezvous (workloads/platform/etcd.py)


@dataclass(frozen=True)
class JobResource:
    """One custom resource of the job, as the job component registers it."""

    suffix: str  # the Pulumi name is "<component>-<suffix>": part of deployed URNs, never to change
    object: dict[str, Any]
    # True: it waits for the namespace, service account, token access and checkpoint claim too; False: for the
    # platform alone (a cluster-scoped runtime needs none of the job's namespace).
    after_prerequisites: bool


class JobApi(ABC):
    """One job API. Implementations hold no state: their methods are pure functions of a JobSpec."""

    name: ClassVar[str]  # the job.api value (stack/job_api.py)
    platform: ClassVar[PlatformParts]

    @abstractmethod
    def custom_resources(self, spec: JobSpec, image: Any = None, bucket: Any = None) -> list[JobResource]:
        """The job's custom resources in the order they are created, each after those before it. `image`: the
        pushed image (a pulumi Output in the stack) for every container; None keeps the spec's. `bucket`: the
        artifacts bucket's name for the pods' variable (the stack's own bucket's, an Output); None keeps the spec's."""

    @abstractmethod
    def worker_pod(self, spec: JobSpec) -> dict[str, Any]:
        """The pod template each node runs (workloads/job/pod.py, with this API's container)."""

    @abstractmethod
    def pod_owner(self, spec: JobSpec) -> dict[str, Any]:
        """The custom resource whose template holds the worker pod: the one the policy pack judges the pods on."""

    def leader_labels(self) -> dict[str, str]:
        """The labels of the pod running global rank 0, the one serving the trainer's metrics."""
        return leader_labels(self.name)

    def objects(self, spec: JobSpec) -> list[dict[str, Any]]:
        """Every Kubernetes object of the job, for the render CLI: the namespace, the pods' service account and its
        access to the nodes (workloads/job/node_access.py), then the custom resources in order."""
        resources = [resource.object for resource in self.custom_resources(spec)]
        return [namespace_manifest(spec), service_account_manifest(spec), *node_access_objects(spec), *resources]


class PyTorchJobApi(JobApi):
    """A kubeflow.org/v1 PyTorchJob under the Training Operator (workloads/job/pytorchjob.py)."""

    name = PYTORCHJOB
    platform = PlatformParts(Controller.TRAINING_OPERATOR, etcd=True)

    def custom_resources(self, spec: JobSpec, image: Any = None, bucket: Any = None) -> list[JobResource]:
        manifest = pytorchjob_manifest(spec)
        if image is not None:
            manifest = with_image(manifest, image)
        if bucket is not None:
            for replica in manifest["spec"]["pytorchReplicaSpecs"].values():
                with_artifacts_bucket(replica["template"]["spec"], bucket)
        return [JobResource("pytorchjob", manifest, after_prerequisites=True)]

    def worker_pod(self, spec: JobSpec) -> dict[str, Any]:
        return pytorchjob_manifest(spec)["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]

    def pod_owner(self, spec: JobSpec) -> dict[str, Any]:
        return pytorchjob_manifest(spec)


class TrainJobApi(JobApi):
    """A Trainer v2 ClusterTrainingRuntime and the TrainJob that runs it (workloads/job/trainjob.py)."""

    name = TRAINJOB
    platform = PlatformParts(Controller.TRAINER_V2, etcd=False)

    def custom_resources(self, spec: JobSpec, image: Any = None, bucket: Any = None) -> list[JobResource]:
        """The runtime after the platform (Trainer v2's CRDs and webhooks), and the TrainJob after the runtime:
        Trainer v2's webhook rejects a TrainJob whose runtime does not exist yet. The pods' variables are the
        runtime's (the TrainJob's command refers to them; its trainer.env would only add to them)."""
        runtime, trainjob = training_runtime(spec), trainjob_manifest(spec)
        if image is not None:
            runtime, trainjob = with_trainjob_image((runtime, trainjob), image)
        if bucket is not None:
            for replicated in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
                with_artifacts_bucket(replicated["template"]["spec"]["template"]["spec"], bucket)
        return [
            JobResource("runtime", runtime, after_prerequisites=False),
            JobResource("trainjob", trainjob, after_prerequisites=True),
        ]

    def worker_pod(self, spec: JobSpec) -> dict[str, Any]:
        return node_pod_template(spec)

    def pod_owner(self, spec: JobSpec) -> dict[str, Any]:
        return training_runtime(spec)


_APIS: dict[str, JobApi] = {api.name: api for api in (PyTorchJobApi(), TrainJobApi())}


def job_api_for(api: str) -> JobApi:
    """The implementation of job.api `api` (a value stack/config.py has checked)."""
    return _APIS[api]


def custom_resource_type(obj: dict[str, Any]) -> str:
    """The Pulumi type token of a custom resource, as the policy pack sees it: kubernetes:<apiVersion>:<kind>."""
    return f"kubernetes:{obj['apiVersion']}:{obj['kind']}"
