"""Which Kubeflow API runs the training job, and the options that belong to one API alone.

`pytorchjob`: a kubeflow.org/v1 PyTorchJob under the Training Operator v1, with torchrun's elastic rendezvous on the
platform's etcd (or c10d) and a min:max node range. `trainjob`: a trainer.kubeflow.org/v1alpha1 TrainJob under
Kubeflow Trainer v2 on JobSet, whose torch plugin sets torchrun's node count, node rank and master address; torchrun
then rendezvouses statically on node 0 (its default --rdzv-backend, "static"), with no elastic range: Trainer v2.2
removed the elastic policy (kubeflow/trainer v2.3.0, pkg/apis/trainer/v1alpha1/trainingruntime_types.go has none).
"""

from __future__ import annotations

from stack.fields import NAMESPACE
from stack.names import COMPONENT_LABEL, JOB_COMPLETION_INDEX_LABEL, JOB_ROLE_LABEL, LEADER_ROLE, TRAINER_COMPONENT

PYTORCHJOB = "pytorchjob"
TRAINJOB = "trainjob"
JOB_APIS = (PYTORCHJOB, TRAINJOB)
DEFAULT_JOB_API = PYTORCHJOB

# torchrun's rendezvous backends by config name; etcd is the PyTorchJob's default (docs/job.md says why).
RDZV_BACKENDS = ("etcd", "c10d")
DEFAULT_RDZV_BACKEND = "etcd"
# torch.distributed.run's default --rdzv-backend: what a TrainJob's torchrun uses, with Trainer v2 giving it
# PET_MASTER_ADDR and PET_MASTER_PORT (torch 2.13, torch/distributed/run.py).
STATIC_RDZV_BACKEND = "static"


def rendezvous_backend(api: str, rdzv_backend: str | None) -> str:
    """The rendezvous torchrun runs for a job of this API: static under a TrainJob, else job.rdzvBackend (None when
    unset) or its default."""
    if api == TRAINJOB:
        return STATIC_RDZV_BACKEND
    return rdzv_backend or DEFAULT_RDZV_BACKEND


# A rolling update of a node group drains each node once, and each drain restarts a TrainJob's gang without counting
# it: the default bound on such restarts lets two rolling updates pass, and a few evictions besides on small jobs.
MIN_DISRUPTION_RESTARTS = 10


def disruption_restarts(configured: int | None, nodes: int) -> int:
    """job.maxDisruptionRestarts, or its default for a job on `nodes` nodes."""
    return configured if configured is not None else max(MIN_DISRUPTION_RESTARTS, 2 * nodes)


def job_api_problems(
    api: str, rdzv_backend: str | None, min_nodes: int | None, max_disruption_restarts: int | None = None
) -> list[str]:
    """Options that only one API has, set on the other: job.rdzvBackend and job.minNodes (the PyTorchJob's) on a
    TrainJob, job.maxDisruptionRestarts (the TrainJob's) on a PyTorchJob; None when unset. Each names the key, its
    value and what is allowed."""
    where = f"{NAMESPACE}:job"
    if api != TRAINJOB:
        if max_disruption_restarts is None:
            return []
        return [
            f"{where}.maxDisruptionRestarts: {max_disruption_restarts} is not allowed with job.api pytorchjob; "
            "expected it unset (a PyTorchJob's operator creates each disrupted pod again on its own; the bound is the "
            "TrainJob's, whose JobSet restarts the whole gang for each)"
        ]
    problems = []
    if rdzv_backend is not None:
        problems.append(
            f"{where}.rdzvBackend: {rdzv_backend!r} is not allowed with job.api trainjob; expected it unset "
            "(Trainer v2 runs torchrun's static rendezvous on node 0; etcd and c10d are the PyTorchJob's)"
        )
    if min_nodes is not None:
        problems.append(
            f"{where}.minNodes: {min_nodes} is not allowed with job.api trainjob; expected it unset "
            "(Trainer v2 has no elastic node range: a TrainJob runs on all gpuNodes.count nodes)"
        )
    return problems


# The custom resources each API creates (the policy pack and the reviewer summary recognise them by these).
PYTORCHJOB_API_VERSION = "kubeflow.org/v1"
PYTORCHJOB_KIND = "PyTorchJob"
# trainer.kubeflow.org serves v1alpha1 only (kubeflow/trainer v2.3.0, charts/kubeflow-trainer/templates/crd/).
TRAINER_API_GROUP = "trainer.kubeflow.org"
TRAINER_API_VERSION = f"{TRAINER_API_GROUP}/v1alpha1"
TRAINJOB_KIND = "TrainJob"
RUNTIME_KIND = "ClusterTrainingRuntime"
# The Job-template label that marks a runtime's trainer step (kubeflow/trainer v2.3.0 pkg/constants/constants.go:
# LabelTrainJobAncestor, AncestorTrainer): the job builds it, the policy pack finds the step by it.
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_ANCESTOR = "trainer"


# The condition each controller sets when the job has succeeded, the one `kubectl wait --for=condition=` waits for:
# the Training Operator's JobSucceeded "Succeeded" (kubeflow/training-operator v1.9, pkg/apis/kubeflow.org/v1
# common_types.go; the kubeflow-training SDK's JOB_CONDITION_SUCCEEDED), Trainer v2's TrainJobComplete "Complete"
# (kubeflow/trainer v2.3.0, pkg/apis/trainer/v1alpha1/trainjob_types.go).
SUCCEEDED_CONDITION = {PYTORCHJOB: "Succeeded", TRAINJOB: "Complete"}
JOB_KIND = {PYTORCHJOB: PYTORCHJOB_KIND, TRAINJOB: TRAINJOB_KIND}


def leader_labels(api: str) -> dict[str, str]:
    """The labels of the pod running global rank 0, the one serving the trainer's metrics: the PyTorchJob's Worker 0
    (the operator's leader role), or a TrainJob's node 0."""
    leader = {JOB_ROLE_LABEL: LEADER_ROLE} if api == PYTORCHJOB else {JOB_COMPLETION_INDEX_LABEL: "0"}
    return {COMPONENT_LABEL: TRAINER_COMPONENT, **leader}
