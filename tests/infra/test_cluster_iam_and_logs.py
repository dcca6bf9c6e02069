"""Node and pod IAM, the KMS key, the control-plane log group and the VPC CNI's configuration, for every stack."""

from __future__ import annotations

import json

import pytest

from stack.fields import ConfigError
from stack.files import load_stack_config, raw_stack_config
from stack.parse import parse_stack_config
from tests.harness.pulumi_program import ProgramRun, run_program

ROLE = "aws:iam/role:Role"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
ADDON = "aws:eks/addon:Addon"


def _attached(run: ProgramRun, role_name: str) -> set[str]:
    role_id = run.named(ROLE, role_name).id
    return {a.inputs["policyArn"].rsplit("/", 1)[-1] for a in run.of_type(ATTACHMENT) if a.inputs["role"] == role_id}


def _addon(run: ProgramRun, name: str):
    (addon,) = [a for a in run.of_type(ADDON) if a.inputs["addonName"] == name]
    return addon


@pytest.mark.program
def test_the_node_role_pulls_images_only_and_has_no_cni_permissions(stack_run: ProgramRun) -> None:
    assert _attached(stack_run, "cluster-node") == {
        "AmazonEKSWorkerNodePolicy",
        "AmazonEC2ContainerRegistryPullOnly",
        "AmazonSSMManagedInstanceCore",
    }


@pytest.mark.program
def test_the_vpc_cni_gets_its_permissions_through_its_own_pod_identity(stack_run: ProgramRun) -> None:
    (association,) = _addon(stack_run, "vpc-cni").inputs["podIdentityAssociations"]
    assert association["serviceAccount"] == "aws-node"
    role = next(r for r in stack_run.of_type(ROLE) if r.outputs["arn"] == association["roleArn"])
    assert _attached(stack_run, role.name) == {"AmazonEKS_CNI_Policy"}


def _associations(run: ProgramRun) -> list[dict[str, str]]:
    """Every Pod Identity association: an add-on's own (namespace kube-system, its service account's) and the
    stack's aws.eks.PodIdentityAssociation resources (the job's token reader, infra/hub_token_access.py)."""
    of_addons = [
        {"namespace": "kube-system", **a}
        for addon in run.of_type(ADDON)
        for a in addon.inputs.get("podIdentityAssociations") or []
    ]
    of_resources = [
        {k: r.inputs[k] for k in ("namespace", "serviceAccount", "roleArn")}
        for r in run.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
    ]
    return of_addons + of_resources


@pytest.mark.program
def test_every_pod_identity_role_trusts_one_service_account_of_this_cluster_only(stack_run: ProgramRun) -> None:
    config = load_stack_config(stack_run.stack)
    cluster_arn = stack_run.one("eks:index:Cluster").outputs["eksCluster"]["arn"]
    roles = [r for r in stack_run.of_type(ROLE) if "pods.eks.amazonaws.com" in r.inputs["assumeRolePolicy"]]
    assert len(roles) >= 2  # the VPC CNI and the EBS CSI driver, and the job's when its model is gated
    for role in roles:
        (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
        assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
        conditions = statement["Condition"]["StringEquals"]
        assert conditions["aws:RequestTag/eks-cluster-arn"] == cluster_arn, role.name
        associations = [a for a in _associations(stack_run) if a["roleArn"] == role.outputs["arn"]]
        assert [(a["namespace"], a["serviceAccount"]) for a in associations] == [
            (conditions["aws:RequestTag/kubernetes-namespace"], conditions["aws:RequestTag/kubernetes-service-account"])
        ], role.name
    assert cluster_arn.endswith(f":cluster/{config.cluster_name}")


@pytest.mark.program
def test_the_cloudwatch_agent_role_is_bound_to_its_service_account_too() -> None:
    run = run_program("p5-2", {"fsdp-eks:monitoring": {"cloudwatchObservability": True}})
    assert run.error is None, run.error
    role = run.named(ROLE, "platform-cloudwatch")
    conditions = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]["Condition"]["StringEquals"]
    assert conditions["aws:RequestTag/kubernetes-namespace"] == "amazon-cloudwatch"
    assert conditions["aws:RequestTag/kubernetes-service-account"] == "cloudwatch-agent"
    assert conditions["aws:RequestTag/eks-cluster-arn"] == run.one("eks:index:Cluster").outputs["eksCluster"]["arn"]


@pytest.mark.program
def test_the_secrets_key_has_an_explicit_policy_and_a_thirty_day_deletion_window(stack_run: ProgramRun) -> None:
    key = stack_run.one("aws:kms/key:Key").inputs
    assert int(key["deletionWindowInDays"]) == 30
    (statement,) = json.loads(key["policy"])["Statement"]
    assert statement["Principal"] == {"AWS": "arn:aws:iam::123456789012:root"}
    assert key["enableKeyRotation"] is True


@pytest.mark.program
def test_the_stack_owns_the_control_plane_log_group_and_creates_it_first(stack_run: ProgramRun) -> None:
    config = load_stack_config(stack_run.stack)
    group = stack_run.one("aws:cloudwatch/logGroup:LogGroup")
    assert group.inputs["name"] == f"/aws/eks/{config.cluster_name}/cluster"
    assert int(group.inputs["retentionInDays"]) == config.cluster.control_plane_log_retention_days
    assert group.urn in stack_run.one("eks:index:Cluster").dependencies


@pytest.mark.program
def test_no_log_group_without_control_plane_logs() -> None:
    cluster = raw_stack_config("p5-2").get("fsdp-eks:cluster", {}) | {"controlPlaneLogs": []}
    run = run_program("p5-2", {"fsdp-eks:cluster": cluster})
    assert run.error is None, run.error
    assert run.of_type("aws:cloudwatch/logGroup:LogGroup") == []


@pytest.mark.program
def test_the_vpc_cni_enforces_network_policies(stack_run: ProgramRun) -> None:
    values = json.loads(_addon(stack_run, "vpc-cni").inputs["configurationValues"])
    assert values == {"enableNetworkPolicy": "true"}  # the add-on's schema takes the string


def test_the_log_retention_is_one_cloudwatch_accepts() -> None:
    raw = {"aws:region": "us-east-1", "fsdp-eks:cluster": {"controlPlaneLogRetentionDays": 45}}
    with pytest.raises(ConfigError, match="controlPlaneLogRetentionDays: 45 is not allowed; expected one of 1, 3"):
        parse_stack_config(raw, "t")
