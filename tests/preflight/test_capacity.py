"""The GPU nodes' vCPU quota (Service Quotas) and their AZ's offering of the type (EC2's real offerings per AZ, as
moto ships them), checked before pulumi up."""

from __future__ import annotations

from dataclasses import replace

from preflight.aws import AwsClients, aws_clients
from preflight.capacity import offering_findings, quota_findings, quota_of
from stack.config import StackConfig
from stack.files import load_stack_config
from tests.preflight.conftest import service_quota, stubbed_quotas

P_QUOTA = ("L-417A185B", "Running On-Demand P instances")


def with_gpu(config: StackConfig, **changes: object) -> StackConfig:
    return replace(config, gpu_nodes=replace(config.gpu_nodes, **changes))


def test_each_family_and_purchase_option_has_its_quota() -> None:
    assert quota_of("p5.48xlarge", "ON_DEMAND") == P_QUOTA
    assert quota_of("p4de.24xlarge", "ON_DEMAND") == P_QUOTA
    assert quota_of("g6e.xlarge", "ON_DEMAND") == ("L-DB2E81BA", "Running On-Demand G and VT instances")
    assert quota_of("p5.48xlarge", "SPOT") == ("L-7212CCBC", "All P Spot Instance Requests")
    assert quota_of("p5.48xlarge", "CAPACITY_BLOCK") is None


def test_a_quota_below_the_nodes_vcpus_is_a_problem_with_the_increase_request(aws: AwsClients) -> None:
    clients, stubber = stubbed_quotas(aws, [("get_service_quota", service_quota(*P_QUOTA, 192.0))])
    (finding,) = quota_findings(load_stack_config("p5-2"), clients.quotas)
    assert finding.level == "problem"
    assert '"Running On-Demand P instances" is 192 vCPUs in us-east-1; 2 x p5.48xlarge need 384' in finding.what
    assert finding.fix == (
        "aws service-quotas request-service-quota-increase --region us-east-1 --service-code ec2 "
        "--quota-code L-417A185B --desired-value 384"
    )
    stubber.assert_no_pending_responses()


def test_a_quota_that_covers_the_nodes_passes(aws: AwsClients) -> None:
    clients, _ = stubbed_quotas(aws, [("get_service_quota", service_quota(*P_QUOTA, 384.0))])
    (finding,) = quota_findings(load_stack_config("p5-2"), clients.quotas)
    assert finding.level == "ok" and "the nodes need 384" in finding.what


def test_a_quota_never_applied_is_read_at_its_default(aws: AwsClients) -> None:
    clients, stubber = stubbed_quotas(
        aws,
        [
            ("get_service_quota", "NoSuchResourceException"),
            ("get_aws_default_service_quota", service_quota("L-DB2E81BA", "Running On-Demand G and VT instances", 0)),
        ],
    )
    (finding,) = quota_findings(load_stack_config("dev"), clients.quotas)
    assert finding.level == "problem" and '"Running On-Demand G and VT instances" is 0 vCPUs' in finding.what
    stubber.assert_no_pending_responses()


def test_a_quota_that_cannot_be_read_is_a_problem_naming_the_permission(aws: AwsClients) -> None:
    clients, _ = stubbed_quotas(aws, [("get_service_quota", "AccessDeniedException")])
    (finding,) = quota_findings(load_stack_config("p5-2"), clients.quotas)
    assert finding.level == "problem" and "AccessDeniedException" in finding.what
    assert "servicequotas:GetServiceQuota" in finding.fix


def test_the_az_that_offers_the_type_passes(aws: AwsClients) -> None:
    (finding,) = offering_findings(load_stack_config("p5-2"), aws.ec2)
    assert (finding.level, finding.what) == ("ok", "us-east-1a offers p5.48xlarge")


def test_an_az_without_the_type_names_the_azs_that_have_it(aws: AwsClients) -> None:
    """p4de-16 asks for us-east-1a, where EC2's offerings (moto's copy) have no p4de.24xlarge."""
    (finding,) = offering_findings(load_stack_config("p4de-16"), aws.ec2)
    assert finding.level == "problem"
    assert finding.what == "us-east-1a does not offer p4de.24xlarge; us-east-1b, us-east-1c do"
    assert finding.fix.startswith("pulumi config set --path fsdp-eks:gpuNodes.availabilityZone us-east-1b (")


def test_an_offering_outside_the_network_says_to_add_it_there(aws: AwsClients) -> None:
    config = load_stack_config("p4de-16")
    config = replace(config, network=replace(config.network, availability_zones=["us-east-1a", "us-east-1d"]))
    (finding,) = offering_findings(config, aws.ec2)
    assert "us-east-1b and add it to fsdp-eks:network.availabilityZones" in finding.fix


def test_a_region_without_the_type_is_a_problem(aws: AwsClients) -> None:
    config = replace(with_gpu(load_stack_config("p5-2"), availability_zone=None), region="af-south-1")
    (finding,) = offering_findings(config, aws_clients("af-south-1").ec2)
    assert finding.level == "problem" and finding.what == "no AZ of af-south-1 offers p5.48xlarge"
