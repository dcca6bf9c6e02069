"""The mocks play the real providers: pulumi-eks's outputs as its source computes them, ids as AWS forms them,
distinct values for distinct things, refusals where the provider or the EKS API refuses, and nothing the fake
does not model passed on by the program."""

from __future__ import annotations

import pytest

from tests.harness.fake_cloud import UNMODELED, FakeCloud
from tests.harness.fake_eks import (
    CREATOR_ROLE_ARN,
    ProviderRefusalError,
    check_managed_node_group_args,
    cluster_outputs,
    node_group_outputs,
)
from tests.harness.preview_runs import FirstPreviewCloud
from tests.harness.pulumi_program import ProgramRun

CLUSTER_INPUTS = {"name": "demo", "version": "1.35", "vpcId": "vpc-0123456789abcdef0"}


def test_pulumi_eks_reports_its_own_control_plane_group_unless_default_groups_are_skipped() -> None:
    own = cluster_outputs("cluster", CLUSTER_INPUTS, "us-east-1")
    eks_created = own["eksCluster"].state["vpcConfig"]["clusterSecurityGroupId"]
    assert own["clusterSecurityGroupId"] == own["clusterSecurityGroup"].id != eks_created
    assert own["nodeSecurityGroupId"] not in (eks_created, own["clusterSecurityGroupId"])

    skipped = cluster_outputs("cluster", {**CLUSTER_INPUTS, "skipDefaultSecurityGroups": True}, "us-east-1")
    assert skipped["clusterSecurityGroup"] is None and skipped["nodeSecurityGroup"] is None
    assert skipped["clusterSecurityGroupId"] == skipped["eksCluster"].state["vpcConfig"]["clusterSecurityGroupId"]
    assert skipped["clusterSecurityGroupId"] == eks_created


def test_pulumi_eks_creates_an_oidc_provider_only_when_asked() -> None:
    assert cluster_outputs("cluster", CLUSTER_INPUTS, "us-east-1")["oidcProviderArn"] == ""
    asked = cluster_outputs("cluster", {**CLUSTER_INPUTS, "createOidcProvider": True}, "us-east-1")
    assert asked["oidcProviderArn"].startswith("arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-east-1.")


def test_pulumi_eks_refuses_public_access_cidrs_on_a_private_endpoint() -> None:
    with pytest.raises(ProviderRefusalError, match="publicAccessCidrs"):
        cluster_outputs(
            "cluster",
            {**CLUSTER_INPUTS, "endpointPublicAccess": False, "publicAccessCidrs": ["10.0.0.0/8"]},
            "us-east-1",
        )


NODE_GROUP = {"nodeRoleArn": "arn:aws:iam::123456789012:role/node", "launchTemplate": {"id": "lt-1", "version": "1"}}


@pytest.mark.parametrize(
    ("group", "template", "refusal"),
    [
        ({"instanceTypes": ["p5.48xlarge"]}, {"instanceType": "p5.48xlarge"}, "Cannot specify instance types"),
        ({"diskSize": 100}, {}, "Disk size"),
        ({"enableIMDSv2": True}, {}, "custom launch template"),
        (
            {"capacityType": "CAPACITY_BLOCK", "instanceTypes": ["p5.48xlarge"]},
            {
                "instanceMarketOptions": {"marketType": "capacity-block"},
                "capacityReservationSpecification": {"capacityReservationTarget": {"capacityReservationId": "cr-1"}},
            },
            "CAPACITY_BLOCK",
        ),
        (
            {},
            {"vpcSecurityGroupIds": ["sg-1"], "networkInterfaces": [{"securityGroups": ["sg-2"]}]},
            "security groups on the instance and its interfaces",
        ),
    ],
)
def test_node_groups_are_refused_where_eks_refuses_them(group: dict, template: dict, refusal: str) -> None:
    with pytest.raises(ProviderRefusalError, match=refusal):
        node_group_outputs("gpu", {**NODE_GROUP, **group}, "us-east-1", ("demo", "1.35"), template)


@pytest.mark.parametrize(
    ("group", "refusal"),
    [
        ({"userData": "#!/bin/bash", "kubeletExtraArgs": "--max-pods=110"}, "custom userData"),
        ({"amiId": "ami-0123456789abcdef0", "amiType": "AL2023_x86_64_NVIDIA"}, "amiId and amiType"),
        ({"nodeRole": "node-role"}, "both nodeRole and nodeRoleArn"),
    ],
)
def test_pulumi_eks_refuses_arguments_that_contradict_each_other(group: dict, refusal: str) -> None:
    with pytest.raises(ProviderRefusalError, match=refusal):
        check_managed_node_group_args({"nodeRoleArn": NODE_GROUP["nodeRoleArn"], **group})


def test_a_capacity_block_group_with_the_type_in_its_template_is_accepted() -> None:
    template = {
        "instanceType": "p5.48xlarge",
        "instanceMarketOptions": {"marketType": "capacity-block"},
        "capacityReservationSpecification": {"capacityReservationTarget": {"capacityReservationId": "cr-1"}},
    }
    outputs = node_group_outputs(
        "gpu", {**NODE_GROUP, "capacityType": "CAPACITY_BLOCK"}, "us-east-1", ("demo", "1.35"), template
    )
    assert outputs["nodeGroup"].state["capacityType"] == "CAPACITY_BLOCK"


def test_a_name_prefix_gives_a_unique_name_after_the_prefix() -> None:
    outputs = node_group_outputs(
        "gpu", {**NODE_GROUP, "nodeGroupNamePrefix": "demo-gpu-"}, "us-east-1", ("demo", "1.35"), {}
    )
    name = outputs["nodeGroup"].state["nodeGroupName"]
    assert name.startswith("demo-gpu-") and len(name) == len("demo-gpu-") + 26
    assert outputs["nodeGroup"].id == f"demo:{name}"


def test_pulumi_eks_gives_a_group_the_cluster_version_only_without_a_launch_template() -> None:
    """nodegroup.ts createManagedNodeGroup: `if (!args.version && !args.launchTemplate)`."""
    without_template = {"nodeRoleArn": NODE_GROUP["nodeRoleArn"]}
    assert (
        node_group_outputs("gpu", without_template, "us-east-1", ("demo", "1.35"), None)["nodeGroup"].state["version"]
        == "1.35"
    )
    assert "version" not in node_group_outputs("gpu", NODE_GROUP, "us-east-1", ("demo", "1.35"), {})["nodeGroup"].state
    pinned = node_group_outputs("gpu", {**NODE_GROUP, "version": "1.34"}, "us-east-1", ("demo", "1.35"), {})
    assert pinned["nodeGroup"].state["version"] == "1.34"


def test_the_provider_refuses_a_node_group_name_prefix_over_37_characters() -> None:
    fits = "c" * 29 + "-system-"
    node_group_outputs("gpu", {**NODE_GROUP, "nodeGroupNamePrefix": fits}, "us-east-1", ("demo", "1.35"), {})
    with pytest.raises(ProviderRefusalError, match=r"node_group_name_prefix to be in the range \(0 - 37\)"):
        node_group_outputs("gpu", {**NODE_GROUP, "nodeGroupNamePrefix": "c" + fits}, "us-east-1", ("demo", "1.35"), {})


def test_eks_refuses_a_second_access_entry_for_the_role_that_creates_the_cluster() -> None:
    """pulumi-eks sets bootstrapClusterCreatorAdminPermissions with an authentication mode: the creator has one."""
    entry = {"principalArn": CREATOR_ROLE_ARN}
    with pytest.raises(ProviderRefusalError, match="ResourceInUseException"):
        cluster_outputs(
            "cluster", {**CLUSTER_INPUTS, "authenticationMode": "API", "accessEntries": {"a": entry}}, "us-east-1"
        )
    with_path = {"principalArn": CREATOR_ROLE_ARN.replace("role/", "role/team/")}
    with pytest.raises(ProviderRefusalError, match="ResourceInUseException"):
        cluster_outputs(
            "cluster", {**CLUSTER_INPUTS, "authenticationMode": "API", "accessEntries": {"a": with_path}}, "us-east-1"
        )
    other = {"principalArn": CREATOR_ROLE_ARN.replace("deployer", "admin")}
    cluster_outputs(
        "cluster", {**CLUSTER_INPUTS, "authenticationMode": "API", "accessEntries": {"a": other}}, "us-east-1"
    )


def test_the_fake_refuses_a_resource_type_it_does_not_model() -> None:
    from pulumi.runtime import mocks

    with pytest.raises(NotImplementedError, match="aws:sqs/queue:Queue"):
        FakeCloud().new_resource(mocks.MockResourceArgs("aws:sqs/queue:Queue", "q", {}, "", "", True))


def test_a_first_preview_answers_no_id_and_only_the_inputs_and_refuses_the_same_types() -> None:
    from pulumi.runtime import mocks

    cloud = FirstPreviewCloud()
    group = {"vpcId": "vpc-0123456789abcdef0", "description": "nodes"}
    args = mocks.MockResourceArgs("aws:ec2/securityGroup:SecurityGroup", "g", group, "", "", True)
    assert cloud.new_resource(args) == ("", group)
    remote = mocks.MockResourceArgs("eks:index:ManagedNodeGroup", "n", {"nodeRoleArn": "r"}, "", "", False)
    assert cloud.new_resource(remote) == ("", {})
    with pytest.raises(NotImplementedError, match="aws:sqs/queue:Queue"):
        cloud.new_resource(mocks.MockResourceArgs("aws:sqs/queue:Queue", "q", {}, "", "", True))


@pytest.mark.program
def test_every_resource_of_a_type_has_its_own_id(stack_run: ProgramRun) -> None:
    by_type: dict[str, list[str]] = {}
    for r in stack_run.resources:
        if r.id:
            by_type.setdefault(r.type, []).append(r.id)
    for type_token, ids in by_type.items():
        assert len(ids) == len(set(ids)), (type_token, ids)


@pytest.mark.program
def test_no_registered_input_carries_an_output_the_fake_does_not_model(stack_run: ProgramRun) -> None:
    for r in stack_run.resources:
        assert UNMODELED not in str(r.inputs), r.name
    assert UNMODELED not in str(stack_run.outputs)
