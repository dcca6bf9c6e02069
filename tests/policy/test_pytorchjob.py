"""PyTorchJob pods are pinned to a catalog instance type and request all of its GPUs and EFA devices; what the check
needs and cannot read during a preview is "not checked"."""

from __future__ import annotations

import pytest

from policy.jobs.pytorchjob import node_type_violations
from policy.props import NOT_CHECKED, UNKNOWN
from stack.files import stack_names
from stack.node_contract import EFA_RESOURCE, GPU_RESOURCE
from tests.policy.examples import pytorchjob, worker_container

PYTORCHJOB = "kubernetes:kubeflow.org/v1:PyTorchJob"


def _set(job: dict, resource: str, value: str | None) -> dict:
    resources = worker_container(job)["resources"]
    for section in ("requests", "limits"):
        if value is None:
            resources[section].pop(resource, None)
        else:
            resources[section][resource] = value
    return job


@pytest.mark.parametrize("stack", stack_names())
def test_every_stacks_job_passes(stack: str) -> None:
    assert node_type_violations(PYTORCHJOB, pytorchjob(stack)) == []


def test_fewer_gpus_than_the_node_has_fail() -> None:
    (problem,) = node_type_violations(PYTORCHJOB, _set(pytorchjob("p5-16"), GPU_RESOURCE, "4"))
    assert "request 4 nvidia.com/gpu" in problem and "has 8" in problem


def test_more_gpus_than_the_node_has_fail() -> None:
    assert node_type_violations(PYTORCHJOB, _set(pytorchjob("dev"), GPU_RESOURCE, "8"))


def test_an_efa_type_without_efa_requests_fails() -> None:
    (problem,) = node_type_violations(PYTORCHJOB, _set(pytorchjob("p5-16"), EFA_RESOURCE, None))
    assert "request 0 vpc.amazonaws.com/efa" in problem and "all 32" in problem


def test_p4de_asks_for_its_four_efa_devices() -> None:
    (problem,) = node_type_violations(PYTORCHJOB, _set(pytorchjob("p4de-16"), EFA_RESOURCE, "32"))
    assert "all 4" in problem


def test_efa_requests_on_a_type_without_efa_fail() -> None:
    (problem,) = node_type_violations(PYTORCHJOB, _set(pytorchjob("dev"), EFA_RESOURCE, "1"))
    assert "no EFA" in problem


def test_request_and_limit_must_agree() -> None:
    job = pytorchjob("p5-16")
    worker_container(job)["resources"]["limits"][GPU_RESOURCE] = "4"
    assert any("request 8 != limit 4" in p for p in node_type_violations(PYTORCHJOB, job))


def test_pods_without_an_instance_type_selector_fail() -> None:
    job = pytorchjob("p5-16")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"].pop(
        "node.kubernetes.io/instance-type"
    )
    assert "no nodeSelector" in node_type_violations(PYTORCHJOB, job)[0]


def test_an_instance_type_outside_the_catalog_fails() -> None:
    job = pytorchjob("p5-16")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"][
        "node.kubernetes.io/instance-type"
    ] = "p3.16xlarge"
    assert "does not know" in node_type_violations(PYTORCHJOB, job)[0]


def test_nproc_per_node_must_be_one_per_gpu() -> None:
    job = pytorchjob("p5-16")
    job["spec"]["nprocPerNode"] = "4"
    assert node_type_violations(PYTORCHJOB, job) == ["spec.nprocPerNode is 4 but p5.48xlarge has 8 GPUs per node"]


def _pod(job: dict) -> dict:
    return job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]


@pytest.mark.parametrize(
    "change,what",
    [
        (lambda job: _pod(job).update(nodeSelector=UNKNOWN), "instance type"),
        (lambda job: _pod(job)["nodeSelector"].update({"node.kubernetes.io/instance-type": UNKNOWN}), "instance type"),
        (lambda job: job["spec"]["pytorchReplicaSpecs"]["Worker"].update(template=UNKNOWN), "instance type"),
        (lambda job: job["spec"].update(pytorchReplicaSpecs=UNKNOWN), "pytorchReplicaSpecs is unknown"),
        (lambda job: _pod(job).update(containers=UNKNOWN), "nvidia.com/gpu and vpc.amazonaws.com/efa requests"),
        (lambda job: worker_container(job).update(resources=UNKNOWN), "requests"),
        (lambda job: worker_container(job)["resources"]["limits"].update({GPU_RESOURCE: UNKNOWN}), GPU_RESOURCE),
        (lambda job: worker_container(job)["resources"]["requests"].update({EFA_RESOURCE: UNKNOWN}), EFA_RESOURCE),
        (lambda job: job["spec"].update(nprocPerNode=UNKNOWN), "nprocPerNode"),
    ],
)
def test_a_value_unknown_during_preview_is_not_checked(change, what: str) -> None:
    job = pytorchjob("p5-16")
    change(job)
    (problem,) = node_type_violations(PYTORCHJOB, job)
    assert problem.startswith(NOT_CHECKED) and what in problem


def test_a_job_without_replica_specs_is_not_checked() -> None:
    job = pytorchjob("p5-16")
    del job["spec"]["pytorchReplicaSpecs"]
    (problem,) = node_type_violations(PYTORCHJOB, job)
    assert problem.startswith(NOT_CHECKED) and "missing" in problem
