"""The job API seam (workloads/job/api.py): each implementation's answers agree with the objects it builds, and the
platform parts, leader and restart rule are the ones each controller needs."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from stack.job_api import JOB_APIS, PYTORCHJOB, TRAINJOB
from stack.names import COMPONENT_LABEL, TRAINER_COMPONENT
from workloads.job.api import Controller, custom_resource_type, job_api_for
from workloads.job.pytorchjob import CONTAINER_NAME, pytorchjob_manifest
from workloads.job.trainjob import NODE, training_runtime, trainjob_manifest

from .job_stacks import STACKS, spec_of

APIS = pytest.mark.parametrize("api", JOB_APIS)


def test_every_config_value_has_its_own_implementation() -> None:
    assert [job_api_for(api).name for api in JOB_APIS] == list(JOB_APIS)


def test_the_builders_are_the_apis_objects() -> None:
    spec = spec_of("dev")
    assert [r.object for r in job_api_for(PYTORCHJOB).custom_resources(spec)] == [pytorchjob_manifest(spec)]
    trainjob = [r.object for r in job_api_for(TRAINJOB).custom_resources(spec)]
    assert trainjob == [training_runtime(spec), trainjob_manifest(spec)]


@APIS
@pytest.mark.parametrize("stack", STACKS)
def test_the_render_list_is_namespace_account_node_access_then_the_custom_resources_in_order(
    api: str, stack: str
) -> None:
    kinds = [obj["kind"] for obj in job_api_for(api).objects(spec_of(stack))]
    expected = ["PyTorchJob"] if api == PYTORCHJOB else ["ClusterTrainingRuntime", "TrainJob"]
    # The role on nodes before the job, so that a launcher ending EXIT_BAD_NODE may taint its node from the start.
    policy = ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    assert kinds == ["Namespace", "ServiceAccount", *policy, "ClusterRole", "ClusterRoleBinding", *expected]


def test_the_resource_names_of_deployed_stacks_stay() -> None:
    """The suffixes are in every deployed job's URNs."""
    spec = spec_of("dev")
    suffixes = {api: [r.suffix for r in job_api_for(api).custom_resources(spec)] for api in JOB_APIS}
    assert suffixes == {PYTORCHJOB: ["pytorchjob"], TRAINJOB: ["runtime", "trainjob"]}


def test_only_the_trainjob_waits_for_the_job_namespace_and_its_runtime_does_not() -> None:
    spec = spec_of("dev")
    waits = {api: [r.after_prerequisites for r in job_api_for(api).custom_resources(spec)] for api in JOB_APIS}
    assert waits == {PYTORCHJOB: [True], TRAINJOB: [False, True]}


@APIS
def test_the_image_reaches_every_container_and_nothing_else(api: str) -> None:
    spec = spec_of("p5-16")
    plain = job_api_for(api).custom_resources(spec)
    pushed = job_api_for(api).custom_resources(spec, image="registry.example/trainer@sha256:abc")
    text = repr([r.object for r in pushed])
    assert spec.image not in text and "registry.example/trainer@sha256:abc" in text
    assert repr([r.object for r in plain]).replace(spec.image, "registry.example/trainer@sha256:abc") == text


def nested(obj: Any) -> list[Any]:
    """`obj` and every dict and list nested in it."""
    children = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, list) else []
    return [obj, *(found for child in children for found in nested(child))]


@APIS
@pytest.mark.parametrize("stack", STACKS)
def test_the_worker_pod_is_held_by_the_pod_owner(api: str, stack: str) -> None:
    spec = dataclasses.replace(spec_of(stack), api=api)
    owner = job_api_for(api).pod_owner(spec)
    assert job_api_for(api).worker_pod(spec) in nested(owner)
    assert custom_resource_type(owner) == f"kubernetes:{owner['apiVersion']}:{owner['kind']}"
    (container,) = job_api_for(api).worker_pod(spec)["spec"]["containers"]
    assert container["name"] == (CONTAINER_NAME if api == PYTORCHJOB else NODE)


@APIS
def test_the_leader_labels_select_a_trainer_pod(api: str) -> None:
    labels = job_api_for(api).leader_labels()
    assert labels[COMPONENT_LABEL] == TRAINER_COMPONENT and len(labels) == 2


def test_each_api_names_its_platform_parts() -> None:
    pytorchjob, trainjob = job_api_for(PYTORCHJOB), job_api_for(TRAINJOB)
    assert (pytorchjob.platform.controller, pytorchjob.platform.etcd) == (Controller.TRAINING_OPERATOR, True)
    assert (trainjob.platform.controller, trainjob.platform.etcd) == (Controller.TRAINER_V2, False)
