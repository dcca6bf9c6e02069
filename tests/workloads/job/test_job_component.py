"""The job's components under the Pulumi SDK's mocks: what they register, under which parent and provider, in
which order, and with which replacement rules."""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from typing import Any

import pytest

from stack.config import StackConfig
from stack.files import load_stack_config, raw_stack_config
from tests.harness.pulumi_program import run_program
from workloads.job.component import TrainingJobArgs
from workloads.job.spec import DEFAULT_CHECKPOINT_CLAIM, JobSpec, job_spec

from .job_component_program import PUSHED_DIGEST, run_components

PYTORCHJOB = "kubernetes:kubeflow.org/v1:PyTorchJob"
SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount"
TRAINER_ACCESS = "fsdp-eks:infra:TrainerAccess"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
GIVEN_IMAGE = "public.ecr.aws/example/trainer:1.0"


@cache
def built() -> list[dict[str, Any]]:
    """The dev stack (a model that needs no token) with a token secret named anyway, as a stack may."""
    return run_components("dev", token_secret="fsdp-eks/hf-token")["resources"]


@cache
def without_token_secret() -> list[dict[str, Any]]:
    return run_components("dev")["resources"]


@cache
def given_image_on_fsx() -> list[dict[str, Any]]:
    return run_components("p5-2", given_image=GIVEN_IMAGE, fsx=True)["resources"]


def one(resources: list[dict[str, Any]], type_token: str) -> dict[str, Any]:
    (found,) = [r for r in resources if r["type"] == type_token]
    return found


def image_of(job: dict[str, Any]) -> str:
    return job["inputs"]["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"]


@pytest.mark.program
def test_the_job_is_replaced_never_patched() -> None:
    job = one(built(), PYTORCHJOB)
    assert job["replaceOnChanges"] == ["*"]
    assert job["deleteBeforeReplace"] is True


@pytest.mark.program
def test_every_child_is_parented_to_its_component() -> None:
    resources = built()
    job_urn = one(resources, "fsdp-eks:workloads:TrainingJob")["urn"]
    image_urn = one(resources, "fsdp-eks:workloads:TrainerImage")["urn"]
    for type_token in (PYTORCHJOB, SERVICE_ACCOUNT, "kubernetes:core/v1:Namespace", TRAINER_ACCESS):
        assert one(resources, type_token)["parent"] == job_urn
    for type_token in ("aws:ecr/repository:Repository", "docker-build:index:Image"):
        assert one(resources, type_token)["parent"] == image_urn
    access_urn = one(resources, TRAINER_ACCESS)["urn"]
    for type_token in ("aws:iam/role:Role", ASSOCIATION):
        assert one(resources, type_token)["parent"] == access_urn
    for type_token in ("aws:iam/policy:Policy", "aws:iam/rolePolicyAttachment:RolePolicyAttachment"):
        assert {r["parent"] for r in resources if r["type"] == type_token} == {access_urn}


@pytest.mark.program
def test_kubernetes_objects_use_the_stacks_provider() -> None:
    provider = one(built(), "pulumi:providers:kubernetes")["urn"]
    for type_token in (PYTORCHJOB, SERVICE_ACCOUNT, "kubernetes:core/v1:Namespace"):
        assert one(built(), type_token)["provider"].startswith(provider)


@pytest.mark.program
def test_the_job_starts_after_the_platform_its_namespace_service_account_and_token_access() -> None:
    resources = built()
    dependencies = one(resources, PYTORCHJOB)["dependencies"]
    platform_child = one(resources, "kubernetes:core/v1:ConfigMap")["urn"]  # the stand-in platform's only child
    for type_token in ("kubernetes:core/v1:Namespace", SERVICE_ACCOUNT, ASSOCIATION):
        assert one(resources, type_token)["urn"] in dependencies
    assert platform_child in dependencies


@pytest.mark.program
def test_the_association_waits_for_the_platform_and_every_attached_policy() -> None:
    resources = built()
    dependencies = one(resources, ASSOCIATION)["dependencies"]
    assert one(resources, "kubernetes:core/v1:ConfigMap")["urn"] in dependencies
    attachments = [r["urn"] for r in resources if r["type"] == "aws:iam/rolePolicyAttachment:RolePolicyAttachment"]
    assert len(attachments) == 2 and set(attachments) <= set(dependencies)  # the artifacts' and the token's


@pytest.mark.program
def test_the_pods_run_as_the_service_account_the_association_names() -> None:
    resources = built()
    association = one(resources, ASSOCIATION)["inputs"]
    account = one(resources, SERVICE_ACCOUNT)["inputs"]["metadata"]
    pod = one(resources, PYTORCHJOB)["inputs"]["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    assert (association["namespace"], association["serviceAccount"]) == (account["namespace"], account["name"])
    assert pod["serviceAccountName"] == account["name"]
    assert association["clusterName"] == load_stack_config("dev").cluster_name


@pytest.mark.program
def test_the_job_runs_the_pushed_digest() -> None:
    resources = built()
    repository = one(resources, "aws:ecr/repository:Repository")["inputs"]
    build = one(resources, "docker-build:index:Image")["inputs"]
    (tag,) = build["tags"]
    assert tag.startswith(f"123456789012.dkr.ecr.us-east-1.amazonaws.com/{repository['name']}:")
    assert image_of(one(resources, PYTORCHJOB)) == f"{tag}@{PUSHED_DIGEST}"


@pytest.mark.program
def test_the_repository_scans_pushes_and_expires_old_images() -> None:
    resources = built()
    repository = one(resources, "aws:ecr/repository:Repository")["inputs"]
    assert repository["imageScanningConfiguration"] == {"scanOnPush": True}
    rules = json.loads(one(resources, "aws:ecr/lifecyclePolicy:LifecyclePolicy")["inputs"]["policy"])["rules"]
    assert {rule["action"]["type"] for rule in rules} == {"expire"}


@pytest.mark.program
def test_the_image_is_built_from_the_dockerfile_and_pushed_without_a_registry_password() -> None:
    # The push uses the host's Docker credentials (workloads/job/image.py): no ECR login token in the state.
    build = one(built(), "docker-build:index:Image")["inputs"]
    assert build["dockerfile"] == {"location": "docker/Dockerfile"}
    assert build["push"] is True and build["buildOnPreview"] is False
    assert build["platforms"] == ["linux/amd64"]
    assert "registries" not in build
    assert set(build["buildArgs"]) == {"BASE_IMAGE", "EFA_INSTALLER_VERSION"}


@pytest.mark.program
def test_a_given_image_is_used_as_it_is_and_nothing_is_built() -> None:
    resources = given_image_on_fsx()
    assert not [r for r in resources if r["type"] == "docker-build:index:Image"]
    assert image_of(one(resources, PYTORCHJOB)) == GIVEN_IMAGE


@pytest.mark.program
def test_no_kubernetes_secret_ever_and_no_secret_read_without_a_token_secret() -> None:
    resources = without_token_secret()
    assert not [r for r in resources if r["type"] == "kubernetes:core/v1:Secret"]
    policies = [r["inputs"]["policy"] for r in resources if r["type"] == "aws:iam/policy:Policy"]
    assert len(policies) == 1 and "secretsmanager" not in policies[0]  # the artifacts bucket's alone
    assert one(resources, SERVICE_ACCOUNT)  # the pods run as their own account all the same
    assert not [r for r in built() if r["type"] == "kubernetes:core/v1:Secret"]


@pytest.mark.program
def test_multi_node_checkpoints_go_to_a_claim_on_the_fsx_file_system() -> None:
    resources = given_image_on_fsx()
    volume = one(resources, "kubernetes:core/v1:PersistentVolume")["inputs"]
    claim = one(resources, "kubernetes:core/v1:PersistentVolumeClaim")
    assert volume["spec"]["csi"]["driver"] == "fsx.csi.aws.com"
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert claim["inputs"]["spec"]["volumeName"] == volume["metadata"]["name"]
    assert claim["urn"] in one(resources, PYTORCHJOB)["dependencies"]
    pod = one(resources, PYTORCHJOB)["inputs"]["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    checkpoints = next(v for v in pod["volumes"] if v["name"] == "checkpoints")
    assert checkpoints["persistentVolumeClaim"]["claimName"] == claim["inputs"]["metadata"]["name"]


@pytest.mark.program
def test_the_deployed_job_has_the_rendezvous_id_the_render_shows() -> None:
    policy = one(without_token_secret(), PYTORCHJOB)["inputs"]["spec"]["elasticPolicy"]
    assert policy["rdzvId"] == job_spec(load_stack_config("dev")).rendezvous_id


def test_the_job_component_takes_a_job_spec_not_the_stack_config() -> None:
    annotations = {f.name: f.type for f in dataclasses.fields(TrainingJobArgs)}  # as written (postponed)
    assert annotations["spec"] == JobSpec.__name__
    assert StackConfig.__name__ not in annotations.values()


def test_only_the_stacks_default_claim_on_its_fsx_is_made_by_the_stack() -> None:
    config = load_stack_config("p5-2")
    assert config.storage.fsx and config.job.checkpoint_claim is None
    assert job_spec(config).checkpoint.on_stack_file_system
    # The user's own claim, even under the default's name, is theirs: the stack makes no volume for it.
    own = dataclasses.replace(config, job=dataclasses.replace(config.job, checkpoint_claim=DEFAULT_CHECKPOINT_CLAIM))
    assert job_spec(own).checkpoint.claim == DEFAULT_CHECKPOINT_CLAIM
    assert not job_spec(own).checkpoint.on_stack_file_system


@pytest.mark.program
def test_the_trainjob_runtimes_pods_run_as_the_service_account_the_association_names() -> None:
    """The TrainJob's pods come from its ClusterTrainingRuntime (JobSet's replicated jobs): every one of them runs as
    the service account the Pod Identity association names, or the token's secret is unreadable there."""
    dev = raw_stack_config("dev")
    job = dev["fsdp-eks:job"] | {"api": "trainjob", "hfTokenSecret": "fsdp-eks/hf-token"}
    run = run_program("dev", {"fsdp-eks:job": job})
    assert run.error is None, run.error
    namespace = run.one(SERVICE_ACCOUNT).inputs["metadata"]["namespace"]
    (association,) = [a.inputs for a in run.of_type(ASSOCIATION) if a.inputs["namespace"] == namespace]
    runtime = run.one("kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime").inputs
    replicated = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    accounts = {r["name"]: r["template"]["spec"]["template"]["spec"].get("serviceAccountName") for r in replicated}
    assert accounts and set(accounts.values()) == {association["serviceAccount"]}, accounts
    assert association["namespace"] == run.one(SERVICE_ACCOUNT).inputs["metadata"]["namespace"]
