"""The Training Operator v1.9.4's PyTorchJob webhook (local/pytorchjob/webhook.py) admits every stack's rendered
job, as deployed and as the local run renders it, and each of its rules refuses an object that breaks it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from local.config import local_stack_config
from local.modelled_fields import UnmodelledFieldError
from local.options import LocalJobOptions, LocalOptions, LocalRunError
from local.pytorchjob import api as pytorchjob_api
from local.pytorchjob.webhook import AdmissionDeniedError, admit_pytorchjob, pytorchjob_problems, validate_pytorchjob
from local.run import run_local
from stack.job_api import PYTORCHJOB
from tests.workloads.job.job_stacks import IMAGE, STACKS, config_of, spec_of
from workloads.job.api import PyTorchJobApi
from workloads.job.pytorchjob import pytorchjob_manifest
from workloads.job.spec import job_spec

Job = dict[str, Any]


def dev_job() -> Job:
    return pytorchjob_manifest(spec_of("dev"))


def worker(job: Job) -> Job:
    return job["spec"]["pytorchReplicaSpecs"]["Worker"]


def containers(job: Job) -> list[Job]:
    return worker(job)["template"]["spec"]["containers"]


@pytest.mark.parametrize("stack", STACKS)
def test_every_stacks_pytorchjob_is_admitted_without_warnings(stack: str) -> None:
    admission = validate_pytorchjob(pytorchjob_manifest(spec_of(stack)))
    assert admission.allowed, admission.errors
    assert admission.warnings == ()


@pytest.mark.parametrize("stack", STACKS)
def test_the_render_clis_pytorchjob_is_admitted(stack: str) -> None:
    objects = PyTorchJobApi().objects(job_spec(config_of(stack), IMAGE))
    for job in (o for o in objects if o["kind"] == "PyTorchJob"):
        admit_pytorchjob(job)


@pytest.mark.parametrize("stack", STACKS)
def test_the_local_runs_pytorchjob_is_admitted(stack: str) -> None:
    config, _ = local_stack_config(stack, LocalJobOptions(api=PYTORCHJOB))
    admit_pytorchjob(pytorchjob_manifest(job_spec(config, "local/trainer:test")))


def test_an_update_is_validated_like_a_create() -> None:
    job = dev_job()
    assert validate_pytorchjob(job, old=copy.deepcopy(job)).allowed


def _set(path: str, value: Any) -> Callable[[Job], None]:
    def change(job: Job) -> None:
        *parents, last = path.split(".")
        target = job
        for key in parents:
            target = target[key]
        target[last] = value

    return change


def _remove_worker(job: Job) -> None:
    job["spec"]["pytorchReplicaSpecs"] = {"Master": job["spec"]["pytorchReplicaSpecs"].pop("Worker")}


def _add_replica(replica_type: str, replicas: int | None) -> Callable[[Job], None]:
    def change(job: Job) -> None:
        replica = copy.deepcopy(worker(job))
        if replicas is None:
            replica.pop("replicas")
        else:
            replica["replicas"] = replicas
        job["spec"]["pytorchReplicaSpecs"][replica_type] = replica

    return change


# Each rule of validatePyTorchJob (kubeflow/trainer v1.9.4) with an object that breaks it, and the field it names.
BROKEN: dict[str, tuple[Callable[[Job], None], str]] = {
    "name with capitals": (_set("metadata.name", "Fsdp-dev"), "metadata.name: Invalid value: 'Fsdp-dev'"),
    "name starting with a digit": (_set("metadata.name", "1-fsdp"), "metadata.name: Invalid value: '1-fsdp'"),
    "name with a dot": (_set("metadata.name", "fsdp.dev"), "metadata.name: Invalid value: 'fsdp.dev'"),
    "name of 64 characters": (_set("metadata.name", "f" * 64), "must be no more than 63 characters"),
    "unknown managedBy": (
        _set("spec.runPolicy.managedBy", "example.com/other"),
        "spec.runPolicy.managedBy: Unsupported value: 'example.com/other'",
    ),
    "elastic policy without a Worker": (_remove_worker, "pytorchReplicaSpecs[Worker]: Required value"),
    "both nProcPerNode fields": (_set("spec.elasticPolicy.nProcPerNode", 1), "elasticPolicy.nProcPerNode: Forbidden"),
    "no replica specs": (_set("spec.pytorchReplicaSpecs", None), "spec.pytorchReplicaSpecs: Required value"),
    "unknown replica type": (_add_replica("Launcher", 1), "pytorchReplicaSpecs[Launcher]: Unsupported value"),
    "no containers": (
        lambda job: worker(job)["template"]["spec"].update(containers=[]),
        "pytorchReplicaSpecs[Worker].template.spec.containers: Required value: must be specified",
    ),
    "a container without an image": (
        lambda job: containers(job)[0].update(image=""),
        "containers[0].image: Required value",
    ),
    "no container named pytorch": (
        lambda job: containers(job)[0].update(name="trainer"),
        "must have at least one container with name pytorch",
    ),
    "two Masters": (_add_replica("Master", 2), "pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1"),
    "a Master without replicas": (_add_replica("Master", None), "pytorchReplicaSpecs[Master].replicas: Forbidden"),
    "no Workers": (_set("spec.pytorchReplicaSpecs.Worker.replicas", 0), "[Worker].replicas: Forbidden: must be at"),
}


@pytest.mark.parametrize("case", BROKEN)
def test_the_webhook_refuses_an_object_that_breaks_a_rule(case: str) -> None:
    change, expected = BROKEN[case]
    job = dev_job()
    change(job)
    admission = validate_pytorchjob(job)
    assert not admission.allowed
    assert any(expected in error for error in admission.errors), admission.errors
    assert pytorchjob_problems(job) == list(admission.errors)
    with pytest.raises(AdmissionDeniedError, match="denied the request"):
        admit_pytorchjob(job)


def test_the_deprecated_nproc_field_alone_is_a_warning_not_a_refusal() -> None:
    job = dev_job()
    job["spec"].pop("nprocPerNode")
    job["spec"]["elasticPolicy"]["nProcPerNode"] = 1
    admission = validate_pytorchjob(job)
    assert admission.allowed
    assert admission.warnings == ("spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead",)


def test_the_known_managers_are_allowed() -> None:
    for manager in ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue"):
        job = dev_job()
        job["spec"]["runPolicy"]["managedBy"] = manager
        assert validate_pytorchjob(job).allowed


def test_a_changed_manager_passes_an_update_as_in_v1_9_4() -> None:
    """v1.9.4's ValidateUpdate compares the new object with itself, so managedBy's immutability is never enforced."""
    old, new = dev_job(), dev_job()
    new["spec"]["runPolicy"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    assert validate_pytorchjob(new, old=old).allowed


def test_the_local_run_refuses_a_job_the_webhook_refuses_before_starting_anything(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def renamed(spec: Any) -> dict[str, Any]:
        job = pytorchjob_manifest(spec)
        job["metadata"]["name"] = "Fsdp_Dev"  # not a DNS-1035 label
        return job

    monkeypatch.setattr(pytorchjob_api, "pytorchjob_manifest", renamed)
    with pytest.raises(LocalRunError, match="denied the request"):
        run_local(LocalOptions(stack="dev", work_dir=tmp_path))
    assert not (tmp_path / "logs").exists()  # no etcd, no agent


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("ttlSecondsAfterFinished", 60, "PyTorchJob.spec.runPolicy.ttlSecondsAfterFinished"),
        ("cleanPodPolicy", "None", "PyTorchJob.spec.runPolicy.cleanPodPolicy='None'"),
        ("managedBy", "kueue.x-k8s.io/multikueue", "PyTorchJob.spec.runPolicy.managedBy='kueue.x-k8s.io/multikueue'"),
    ],
)
def test_an_admitted_pytorchjob_with_a_field_no_model_reads_is_refused_naming_it(
    field: str, value: Any, path: str
) -> None:
    """The webhook admits it; the local run's models (the operator's variables, restart rule and pod cleanup) would
    act as if the field were not there."""
    job = dev_job()
    job["spec"]["runPolicy"][field] = value
    assert validate_pytorchjob(job).allowed
    with pytest.raises(UnmodelledFieldError) as raised:
        admit_pytorchjob(job)
    assert raised.value.paths == [path]
