"""Every registered resource's inputs fit the pinned SDK's own input types, recursively, for every stack; and the
check itself catches what it is there to catch."""

from __future__ import annotations

import copy

import pytest

from tests.harness.input_types import check_resource_inputs
from tests.harness.pulumi_program import ProgramRun, run_program

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"


@pytest.mark.program
def test_every_registered_input_fits_the_sdk_input_types(stack_run: ProgramRun) -> None:
    problems = [f"{r.type} {r.name}: {p}" for r in stack_run.resources for p in check_resource_inputs(r.type, r.inputs)]
    assert problems == []


@pytest.fixture(scope="module")
def template_inputs() -> dict:
    return run_program("p5-16").named(LAUNCH_TEMPLATE, "gpu-template").inputs


@pytest.mark.program
def test_a_misspelt_nested_key_is_reported_with_its_path(template_inputs: dict) -> None:
    inputs = copy.deepcopy(template_inputs)
    inputs["metadataOptions"]["httpPutResponseHoplimit"] = 1
    (problem,) = check_resource_inputs(LAUNCH_TEMPLATE, inputs)
    assert problem.startswith("metadataOptions.httpPutResponseHoplimit: not an input of")
    assert "did you mean httpPutResponseHopLimit?" in problem


@pytest.mark.program
def test_a_wrong_type_deep_in_a_list_is_reported_with_its_path(template_inputs: dict) -> None:
    inputs = copy.deepcopy(template_inputs)
    inputs["networkInterfaces"][1]["securityGroups"] = "sg-0123456789abcdef0"
    inputs["blockDeviceMappings"][0]["ebs"]["volumeSize"] = "500 GiB"
    assert check_resource_inputs(LAUNCH_TEMPLATE, inputs) == [
        "networkInterfaces[1].securityGroups: expected a list, got 'sg-0123456789abcdef0'",
        "blockDeviceMappings[0].ebs.volumeSize: expected an integer, got '500 GiB'",
    ]


def test_an_input_the_component_does_not_declare_is_reported() -> None:
    problems = check_resource_inputs("eks:index:ManagedNodeGroup", {"updateConfig": {"maxUnavailable": 1}})
    assert problems and problems[0].startswith("updateConfig: not an input of ManagedNodeGroupArgs")


def test_enum_values_and_kubernetes_objects_are_checked() -> None:
    assert check_resource_inputs("eks:index:Cluster", {"authenticationMode": "IAM"}) == [
        "authenticationMode: 'IAM' is not one of ['CONFIG_MAP', 'API', 'API_AND_CONFIG_MAP']"
    ]
    service = {"apiVersion": "v1", "kind": "Service", "spec": {"ports": [{"port": 80.0, "protcol": "TCP"}]}}
    (problem,) = check_resource_inputs("kubernetes:core/v1:Service", service)
    assert problem.startswith("spec.ports[0].protcol: not an input of ServicePortArgs")
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"lables": {}}}
    (problem,) = check_resource_inputs("kubernetes:kubeflow.org/v1:PyTorchJob", job)
    assert problem.startswith("metadata.lables: not an input of ObjectMetaArgs")


def test_provider_inputs_arrive_as_strings_and_are_checked_as_their_types() -> None:
    assert check_resource_inputs("pulumi:providers:kubernetes", {"enableServerSideApply": "true"}) == []
    assert check_resource_inputs("pulumi:providers:kubernetes", {"enableServerSideApply": "yes"}) == [
        "enableServerSideApply: expected a boolean, got 'yes'"
    ]
