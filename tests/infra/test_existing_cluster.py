"""An existing cluster is reached from its name: the endpoint and CA from aws.eks.getCluster, and a kubeconfig whose
user runs `aws eks get-token`, so nothing in the Kubernetes provider's inputs (kept in the state) is a credential."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.existing_cluster import EXEC_API_VERSION, exec_kubeconfig, token_command
from tests.harness.fake_eks import describe_cluster
from tests.harness.pulumi_program import ProgramRun, Registered
from tests.infra.existing_cluster_stack import existing_cluster_config, run_existing_cluster

# Every way a kubeconfig user can carry a credential of its own (kubectl config set-credentials: token, basic auth,
# client certificate and key, the legacy auth-provider).
USER_CREDENTIAL_FIELDS = {
    "token",
    "tokenFile",
    "username",
    "password",
    "client-certificate",
    "client-certificate-data",
    "client-key",
    "client-key-data",
    "auth-provider",
}
GET_CLUSTER = "aws:eks/getCluster:getCluster"
ENDPOINT = "https://EXAMPLE.gr7.eu-west-1.eks.amazonaws.com"
CA = "Q0EgY2VydGlmaWNhdGU="


@pytest.fixture(scope="module", params=["update", "first"])
def existing_run(request: pytest.FixtureRequest) -> ProgramRun:
    return run_existing_cluster(request.param)


def cluster_provider(run: ProgramRun) -> Registered:
    (provider,) = [p for p in run.of_type("pulumi:providers:kubernetes") if p.inputs.get("kubeconfig")]
    return provider


def cluster_settings() -> tuple[str, str]:
    config = existing_cluster_config()
    return config["fsdp-eks:cluster"]["name"], config["aws:region"]


def test_the_kubeconfig_user_runs_aws_eks_get_token_for_the_cluster_and_region() -> None:
    (user,) = exec_kubeconfig("team-gpu-cluster", "eu-west-1", ENDPOINT, CA)["users"]
    plugin = user["user"]["exec"]
    assert set(user["user"]) == {"exec"}
    assert plugin["apiVersion"] == EXEC_API_VERSION == "client.authentication.k8s.io/v1beta1"
    assert [plugin["command"], *plugin["args"]] == token_command("team-gpu-cluster", "eu-west-1")
    assert token_command("team-gpu-cluster", "eu-west-1") == [
        "aws",
        "eks",
        "get-token",
        "--cluster-name",
        "team-gpu-cluster",
        "--region",
        "eu-west-1",
        "--output",
        "json",
    ]


def test_the_kubeconfig_names_the_clusters_endpoint_and_ca_and_its_context_uses_them() -> None:
    kubeconfig = exec_kubeconfig("team-gpu-cluster", "eu-west-1", ENDPOINT, CA)
    (cluster,) = kubeconfig["clusters"]
    assert cluster["cluster"] == {"server": ENDPOINT, "certificate-authority-data": CA}
    (context,) = [c for c in kubeconfig["contexts"] if c["name"] == kubeconfig["current-context"]]
    assert context["context"] == {"cluster": cluster["name"], "user": kubeconfig["users"][0]["name"]}


@pytest.mark.program
def test_the_providers_kubeconfig_is_built_from_what_get_cluster_answers(existing_run: ProgramRun) -> None:
    name, region = cluster_settings()
    described = describe_cluster({"name": name, "region": region}, region)
    expected = exec_kubeconfig(name, region, described["endpoint"], described["certificateAuthorities"][0]["data"])
    assert json.loads(cluster_provider(existing_run).inputs["kubeconfig"]) == expected
    assert GET_CLUSTER in existing_run.invokes


@pytest.mark.program
def test_the_providers_kubeconfig_holds_no_credential(existing_run: ProgramRun) -> None:
    kubeconfig: dict[str, Any] = json.loads(cluster_provider(existing_run).inputs["kubeconfig"])
    for user in kubeconfig["users"]:
        assert not USER_CREDENTIAL_FIELDS & set(user["user"]), user
        assert not USER_CREDENTIAL_FIELDS & set(user["user"]["exec"]), user  # nothing beside the command either
        assert "env" not in user["user"]["exec"]  # no AWS keys handed to the plugin


@pytest.mark.program
def test_an_existing_cluster_registers_no_network_cluster_or_nodes(existing_run: ProgramRun) -> None:
    created = [r.type for r in existing_run.resources if r.type.startswith(("aws:ec2", "aws:eks/cluster", "eks:"))]
    assert created == []
    assert not existing_run.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    assert existing_run.of_type("kubernetes:kubeflow.org/v1:PyTorchJob")  # the platform and job still go onto it
    assert existing_run.outputs["clusterName"] == cluster_settings()[0]


@pytest.mark.program
def test_every_kubernetes_resource_goes_through_the_existing_clusters_provider(existing_run: ProgramRun) -> None:
    provider = cluster_provider(existing_run)
    for resource in existing_run.resources:
        if resource.type.startswith("kubernetes:"):
            assert resource.provider.rsplit("::", 1)[0] == provider.urn, resource.name
