"""__main__.py under the Pulumi SDK's mocks with job.api trainjob: Kubeflow Trainer v2's pinned chart in place of the
Training Operator v1 and etcd, installed before the job's runtime and TrainJob and deleted after them; and the
reverse with the default PyTorchJob."""

from __future__ import annotations

import pytest

from stack.fields import NAMESPACE
from stack.files import stack_names
from stack.versions import KUBEFLOW_TRAINER_CHART_VERSION
from tests.harness.destroy_order import dependency_graph, depends_on
from tests.harness.input_types import check_resource_inputs
from tests.harness.pulumi_program import ProgramRun, Registered, run_program
from workloads.platform.trainer_v2 import TRAINER_V2_NAMESPACE

from .trainjob_stacks import trainjob_raw_config

pytestmark = pytest.mark.program  # every test here runs __main__.py under the mocks

RELEASE = "kubernetes:helm.sh/v3:Release"
TRAINER_CHART = "oci://ghcr.io/kubeflow/charts/kubeflow-trainer"
TRAINJOB = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
RUNTIME = "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime"
PYTORCHJOB = "kubernetes:kubeflow.org/v1:PyTorchJob"
OPERATOR_V1 = "kubernetes:kustomize/v2:Directory"
NAMESPACE_TYPE = "kubernetes:core/v1:Namespace"
# What the nodes and the cluster must keep until the job is gone (tests/infra/test_destroy_order.py).
RUN_TIME_NEEDS = ("eks:index:ManagedNodeGroup", "eks:index:Cluster")


@pytest.fixture(scope="module", params=stack_names())
def trainjob_run(request: pytest.FixtureRequest) -> ProgramRun:
    key = f"{NAMESPACE}:job"
    run = run_program(request.param, {key: trainjob_raw_config(request.param)[key]})
    assert run.error is None, run.error
    return run


def trainer_release(run: ProgramRun) -> Registered:
    (release,) = [r for r in run.of_type(RELEASE) if r.inputs["chart"] == TRAINER_CHART]
    return release


def etcd_objects(run: ProgramRun) -> list[Registered]:
    return [r for r in run.resources if r.type.startswith("kubernetes:") and r.name.endswith("-etcd")]


def test_trainer_v2_is_the_pinned_chart_from_its_oci_registry(trainjob_run: ProgramRun) -> None:
    release = trainer_release(trainjob_run)
    assert release.inputs["version"] == KUBEFLOW_TRAINER_CHART_VERSION == "2.3.0"
    assert release.inputs["namespace"] == TRAINER_V2_NAMESPACE
    assert "repositoryOpts" not in release.inputs  # the oci:// reference names the registry
    assert release.inputs["values"]["runtimes"] == {"defaultEnabled": False}  # no hook Job that needs the internet


def test_the_trainer_v2_namespace_comes_before_its_release(trainjob_run: ProgramRun) -> None:
    graph = dependency_graph(trainjob_run.resources)
    namespaces = trainjob_run.of_type(NAMESPACE_TYPE)
    (namespace,) = [r for r in namespaces if r.inputs["metadata"]["name"] == TRAINER_V2_NAMESPACE]
    assert depends_on(graph, trainer_release(trainjob_run).urn, namespace.urn)


def test_nothing_of_the_v1_operator_or_etcd_is_installed(trainjob_run: ProgramRun) -> None:
    assert trainjob_run.of_type(OPERATOR_V1) == []
    assert trainjob_run.of_type(PYTORCHJOB) == []
    assert etcd_objects(trainjob_run) == []


def test_the_runtime_comes_after_the_chart_and_the_trainjob_after_the_runtime(trainjob_run: ProgramRun) -> None:
    graph = dependency_graph(trainjob_run.resources)
    (runtime,), (trainjob,) = trainjob_run.of_type(RUNTIME), trainjob_run.of_type(TRAINJOB)
    release = trainer_release(trainjob_run)
    assert depends_on(graph, runtime.urn, release.urn)
    assert depends_on(graph, trainjob.urn, runtime.urn)
    assert trainjob.inputs["spec"]["runtimeRef"]["name"] == runtime.inputs["metadata"]["name"]


def test_destroy_deletes_the_trainjob_and_runtime_before_the_nodes_and_cluster(trainjob_run: ProgramRun) -> None:
    graph = dependency_graph(trainjob_run.resources)
    needs = [r for r in trainjob_run.resources if r.type in RUN_TIME_NEEDS]
    job_objects = [*trainjob_run.of_type(RUNTIME), *trainjob_run.of_type(TRAINJOB)]
    assert needs and len(job_objects) == 2
    for job_object in job_objects:
        assert all(depends_on(graph, job_object.urn, need.urn) for need in needs), job_object.name


def test_every_registered_input_fits_the_sdk_input_types(trainjob_run: ProgramRun) -> None:
    problems = [
        f"{r.type} {r.name}: {p}" for r in trainjob_run.resources for p in check_resource_inputs(r.type, r.inputs)
    ]
    assert problems == []


def test_the_pytorchjob_stack_installs_nothing_of_trainer_v2(stack_run: ProgramRun) -> None:
    assert [r for r in stack_run.of_type(RELEASE) if r.inputs["chart"] == TRAINER_CHART] == []
    assert stack_run.of_type(RUNTIME) == stack_run.of_type(TRAINJOB) == []
    assert len(stack_run.of_type(OPERATOR_V1)) == 1
    assert etcd_objects(stack_run)
