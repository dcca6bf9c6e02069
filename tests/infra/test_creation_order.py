"""Dependencies AWS needs in place at creation that the resources' inputs do not carry."""

from __future__ import annotations

import pytest

from tests.harness.pulumi_program import ProgramRun

pytestmark = pytest.mark.program  # every test here runs __main__.py under the mocks

RULE_TYPES = (
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
)


def test_the_file_system_is_created_after_every_lustre_rule(stack_run: ProgramRun) -> None:
    file_systems = stack_run.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    if not file_systems:
        return
    (file_system,) = file_systems
    group = stack_run.named("aws:ec2/securityGroup:SecurityGroup", "checkpoints-lustre")
    rules = [r for t in RULE_TYPES for r in stack_run.of_type(t) if r.inputs["securityGroupId"] == group.id]
    assert len(rules) == 5  # 988 and 1018-1023 from the nodes and from the group itself, and egress
    assert {r.urn for r in rules} <= set(file_system.dependencies)


def test_nat_gateways_and_their_addresses_wait_for_the_internet_gateway(stack_run: ProgramRun) -> None:
    gateway = stack_run.one("aws:ec2/internetGateway:InternetGateway")
    for resource in [*stack_run.of_type("aws:ec2/natGateway:NatGateway"), *stack_run.of_type("aws:ec2/eip:Eip")]:
        assert gateway.urn in resource.dependencies, resource.name
