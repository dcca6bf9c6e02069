"""Nodes join the cluster only in the security group EKS creates for it: a launch template that names security
groups keeps EKS from adding that group (EKS user guide, "Customize managed nodes with launch templates"), so
every template must name it, and the Lustre rules must admit it."""

from __future__ import annotations

import pytest

from tests.harness.pulumi_program import ProgramRun

pytestmark = pytest.mark.program  # every test here runs __main__.py under the mocks

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"


def eks_cluster_security_group(run: ProgramRun) -> str:
    """The group EKS created with the control plane (pulumi-eks's `eksCluster.vpcConfig.clusterSecurityGroupId`)."""
    return run.one("eks:index:Cluster").outputs["eksCluster"]["vpcConfig"]["clusterSecurityGroupId"]


def _primary_groups(template: dict) -> list[str]:
    interfaces = template.get("networkInterfaces") or []
    primary = [i for i in interfaces if int(i["networkCardIndex"]) == 0 and int(i["deviceIndex"]) == 0]
    return primary[0]["securityGroups"] if primary else template.get("vpcSecurityGroupIds") or []


def test_every_node_launch_template_puts_the_node_in_the_eks_cluster_security_group(stack_run: ProgramRun) -> None:
    group = eks_cluster_security_group(stack_run)
    templates = stack_run.of_type(LAUNCH_TEMPLATE)
    assert templates
    for template in templates:
        assert group in _primary_groups(template.inputs), template.name


def test_pulumi_eks_makes_no_security_groups_of_its_own(stack_run: ProgramRun) -> None:
    outputs = stack_run.one("eks:index:Cluster").outputs
    assert outputs["clusterSecurityGroup"] is None and outputs["nodeSecurityGroup"] is None


def test_lustre_admits_the_nodes_through_the_eks_cluster_security_group(stack_run: ProgramRun) -> None:
    rules = [r for r in stack_run.of_type(INGRESS) if r.name.startswith("checkpoints-lustre-nodes")]
    if not stack_run.of_type("aws:fsx/lustreFileSystem:LustreFileSystem"):
        assert rules == []
        return
    assert rules
    for rule in rules:
        assert rule.inputs["referencedSecurityGroupId"] == eks_cluster_security_group(stack_run), rule.name


def test_the_nodes_admit_lustre_from_the_file_system_on_its_ports(stack_run: ProgramRun) -> None:
    """FSx for Lustre user guide, "File system access control with Amazon VPC": the clients' groups admit 988 and
    1018-1023 from the file system's group, which the EKS cluster security group does not by itself."""
    file_systems = stack_run.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    nodes = eks_cluster_security_group(stack_run)
    admitted = {
        (int(r.inputs["fromPort"]), int(r.inputs["toPort"]))
        for r in stack_run.of_type(INGRESS)
        if r.inputs["securityGroupId"] == nodes and r.inputs.get("ipProtocol") == "tcp"
        for fs in file_systems
        if r.inputs.get("referencedSecurityGroupId") in fs.inputs["securityGroupIds"]
    }
    assert admitted == ({(988, 988), (1018, 1023)} if file_systems else set())
