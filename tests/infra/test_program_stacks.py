"""__main__.py under Pulumi mocks, for every stack file, with config passed as the engine passes it."""

from __future__ import annotations

import pytest

from sizing.catalog import CATALOG
from stack.files import load_stack_config
from tests.harness.pulumi_program import ProgramRun, run_program

pytestmark = pytest.mark.program  # every test here runs __main__.py under the mocks

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
NODE_GROUP = "eks:index:ManagedNodeGroup"


def _efa_group(run: ProgramRun):
    (group,) = [g for g in run.of_type("aws:ec2/securityGroup:SecurityGroup") if g.name == "gpu-efa"]
    return group


def _gpu_node_group(run: ProgramRun):
    return next(r for r in run.of_type(NODE_GROUP) if r.name == "gpu-nodes")


def _gpu_template(run: ProgramRun):
    return run.named(LAUNCH_TEMPLATE, "gpu-template")


def test_launch_template_has_one_efa_interface_per_network_card(stack_run: ProgramRun) -> None:
    config = load_stack_config(stack_run.stack)
    instance = config.gpu_nodes.instance
    interfaces = _gpu_template(stack_run).inputs.get("networkInterfaces") or []
    if not config.gpu_nodes.efa_enabled:
        assert interfaces == []
        return
    assert len(interfaces) == instance.efa_interfaces == instance.network_cards
    assert sorted(int(i["networkCardIndex"]) for i in interfaces) == list(range(instance.network_cards))
    primary = next(i for i in interfaces if int(i["networkCardIndex"]) == 0)
    assert (primary["interfaceType"], int(primary["deviceIndex"])) == ("efa", 0)
    for interface in interfaces:
        if int(interface["networkCardIndex"]) == 0:
            continue
        if instance.efa_only_supported:
            assert (interface["interfaceType"], int(interface["deviceIndex"])) == ("efa-only", 0)
        else:
            assert (interface["interfaceType"], int(interface["deviceIndex"])) == ("efa", 1)


def test_p5_gets_32_efa_interfaces_and_p4de_gets_4() -> None:
    expected = {"p5-16": 32, "p4de-16": 4}
    for stack, count in expected.items():
        run = run_program(stack)
        assert len(_gpu_template(run).inputs["networkInterfaces"]) == count


def test_every_efa_interface_is_in_the_efa_security_group(stack_run: ProgramRun) -> None:
    efa_sg_id = _efa_group(stack_run).id
    for interface in _gpu_template(stack_run).inputs.get("networkInterfaces") or []:
        assert efa_sg_id in interface["securityGroups"]


def test_efa_security_group_allows_all_traffic_to_and_from_itself(stack_run: ProgramRun) -> None:
    group_id = _efa_group(stack_run).id
    for rule_type in (
        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
        "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
    ):
        (rule,) = [r for r in stack_run.of_type(rule_type) if r.inputs["securityGroupId"] == group_id]
        assert rule.inputs["securityGroupId"] == group_id
        assert rule.inputs["referencedSecurityGroupId"] == group_id
        assert rule.inputs["ipProtocol"] == "-1"


def test_placement_group_only_without_a_capacity_reservation(stack_run: ProgramRun) -> None:
    config = load_stack_config(stack_run.stack)
    groups = stack_run.of_type("aws:ec2/placementGroup:PlacementGroup")
    template = _gpu_template(stack_run).inputs
    if config.gpu_nodes.capacity_reservation_id:
        assert groups == []
        assert "placement" not in template
        target = template["capacityReservationSpecification"]["capacityReservationTarget"]
        assert target["capacityReservationId"] == config.gpu_nodes.capacity_reservation_id
    else:
        assert [g.inputs["strategy"] for g in groups] == ["cluster"]
        assert template["placement"]["groupName"] == groups[0].outputs["name"]


def test_gpu_nodes_sit_in_one_subnet_in_the_configured_availability_zone(stack_run: ProgramRun) -> None:
    config = load_stack_config(stack_run.stack)
    subnet_ids = _gpu_node_group(stack_run).inputs["subnetIds"]
    assert len(subnet_ids) == 1
    subnet = next(s for s in stack_run.of_type("aws:ec2/subnet:Subnet") if s.id == subnet_ids[0])
    assert subnet.inputs["availabilityZone"] == config.gpu_availability_zone
    assert "private" in subnet.name


def test_every_launch_template_requires_imdsv2_within_one_hop(stack_run: ProgramRun) -> None:
    """Hop limit 1: pods in their own network namespace cannot reach the node role's credentials."""
    templates = stack_run.of_type(LAUNCH_TEMPLATE)
    assert {t.name for t in templates} == {"gpu-template", "cluster-system-template"}
    for template in templates:
        options = template.inputs["metadataOptions"]
        assert options["httpTokens"] == "required", template.name
        assert int(options["httpPutResponseHopLimit"]) == 1, template.name


def test_root_volume_is_large_encrypted_gp3(stack_run: ProgramRun) -> None:
    ebs = _gpu_template(stack_run).inputs["blockDeviceMappings"][0]["ebs"]
    assert ebs["volumeType"] == "gp3"
    assert int(ebs["volumeSize"]) >= 100
    assert ebs["encrypted"] == "true"


def test_scaling_config_starts_at_the_stack_node_count_within_the_autoscalers_bounds(stack_run: ProgramRun) -> None:
    gpu = load_stack_config(stack_run.stack).gpu_nodes
    scaling = _gpu_node_group(stack_run).inputs["scalingConfig"]
    assert int(scaling["desiredSize"]) == gpu.count
    assert int(scaling["minSize"]) == (gpu.count if gpu.keeps_idle_nodes else 0)
    assert int(scaling["maxSize"]) == max(gpu.count + gpu.spares, 1)


def test_gpu_node_group_uses_the_al2023_nvidia_ami_with_gpu_taint_and_labels(stack_run: ProgramRun) -> None:
    inputs = _gpu_node_group(stack_run).inputs
    config = load_stack_config(stack_run.stack)
    assert inputs["amiType"] == "AL2023_x86_64_NVIDIA"
    assert inputs["instanceTypes"] == [config.gpu_nodes.instance_type]
    assert inputs["capacityType"] == config.gpu_nodes.capacity_type
    assert {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"} in inputs["taints"]
    assert inputs["labels"]["fsdp-eks/node-group"] == "gpu"
    assert inputs["launchTemplate"]["id"] == _gpu_template(stack_run).id


def test_one_and_sixteen_nodes_register_the_same_resources() -> None:
    def shape(run: ProgramRun) -> list[tuple[str, str]]:
        assert run.error is None, run.error
        return sorted((r.type, r.name) for r in run.resources)

    assert shape(run_program("p5-1")) == shape(run_program("p5-16"))


def test_cluster_uses_api_authentication_kms_and_control_plane_logs_and_no_oidc_provider(stack_run: ProgramRun) -> None:
    cluster = stack_run.one("eks:index:Cluster").inputs
    config = load_stack_config(stack_run.stack)
    assert cluster["authenticationMode"] == "API"
    # Pods get AWS credentials through EKS Pod Identity: an IAM OIDC provider would be used by nothing.
    assert cluster["createOidcProvider"] is False
    assert stack_run.one("eks:index:Cluster").outputs["oidcProviderArn"] == ""
    assert cluster["version"] == config.cluster.kubernetes_version
    assert cluster["encryptionConfigKeyArn"]  # the stack's own KMS key
    assert set(cluster["enabledClusterLogTypes"]) == {"api", "audit", "authenticator", "controllerManager", "scheduler"}
    assert cluster["endpointPrivateAccess"] is True
    assert cluster["skipDefaultNodeGroup"] is True
    assert stack_run.one("aws:kms/key:Key").inputs["enableKeyRotation"] is True


def test_cluster_add_ons_are_installed_and_the_fsx_driver_only_with_a_file_system(stack_run: ProgramRun) -> None:
    addons = {r.inputs["addonName"]: r for r in stack_run.of_type("aws:eks/addon:Addon")}
    with_fsx = bool(stack_run.of_type("aws:fsx/lustreFileSystem:LustreFileSystem"))
    assert set(addons) == {
        "vpc-cni",
        "coredns",
        "kube-proxy",
        "aws-ebs-csi-driver",
        "eks-pod-identity-agent",
        "eks-node-monitoring-agent",
        *(["aws-fsx-csi-driver"] if with_fsx else []),
    }
    ebs = addons["aws-ebs-csi-driver"].inputs["podIdentityAssociations"][0]
    assert ebs["serviceAccount"] == "ebs-csi-controller-sa"


def test_node_groups_wait_for_the_networking_add_ons(stack_run: ProgramRun) -> None:
    addon_urns = {r.urn for r in stack_run.of_type("aws:eks/addon:Addon") if r.inputs["addonName"] == "vpc-cni"}
    for group in stack_run.of_type(NODE_GROUP):
        assert addon_urns <= set(group.dependencies), group.name


def test_system_node_group_runs_the_standard_ami_in_private_subnets(stack_run: ProgramRun) -> None:
    system = next(r for r in stack_run.of_type(NODE_GROUP) if r.name == "cluster-system")
    assert system.inputs["amiType"] == "AL2023_x86_64_STANDARD"
    assert system.inputs["labels"] == {"fsdp-eks/node-group": "system"}
    private_ids = {s.id for s in stack_run.of_type("aws:ec2/subnet:Subnet") if "private" in s.name}
    assert set(system.inputs["subnetIds"]) == private_ids


def test_vpc_spans_two_azs_with_nat_and_an_s3_gateway_endpoint(stack_run: ProgramRun) -> None:
    subnets = stack_run.of_type("aws:ec2/subnet:Subnet")
    assert len({s.inputs["availabilityZone"] for s in subnets}) >= 2
    assert stack_run.of_type("aws:ec2/natGateway:NatGateway")
    endpoint = stack_run.one("aws:ec2/vpcEndpoint:VpcEndpoint").inputs
    assert endpoint["vpcEndpointType"] == "Gateway"
    assert endpoint["serviceName"] == f"com.amazonaws.{load_stack_config(stack_run.stack).region}.s3"


def test_stack_outputs(stack_run: ProgramRun) -> None:
    config = load_stack_config(stack_run.stack)
    outputs = stack_run.outputs
    assert outputs["clusterName"] == config.cluster_name
    assert outputs["region"] == config.region
    # The name EKS gave the group: its prefix and a unique suffix, read back from pulumi-eks's nodeGroup output.
    node_group = _gpu_node_group(stack_run).outputs["nodeGroup"]
    assert outputs["gpuNodeGroupName"] == node_group["nodeGroupName"]
    assert outputs["gpuNodeGroupName"].startswith(f"{config.cluster_name}-gpu-")
    assert int(outputs["totalGpus"]) == config.gpu_nodes.count * CATALOG[config.gpu_nodes.instance_type].gpus
    # At the price the preview read (tests/infra/test_prices.py says from where).
    assert outputs["estimatedCostPerHour"] == round(config.gpu_nodes.count * outputs["gpuNodePrice"]["usdPerHour"], 2)
    assert outputs["estimatedCostPerHour"] > 0
    assert outputs["jobSizing"]["fits"] is True
    assert outputs["jobSizing"]["gpuMemoryGiB"] == config.gpu_nodes.instance.gpu_memory_gib


def test_every_child_resource_is_parented_to_a_component(stack_run: ProgramRun) -> None:
    for resource in stack_run.resources:
        if resource.type.startswith("fsdp-eks:"):
            continue
        assert not resource.parent.endswith("pulumi:pulumi:Stack::" + f"fsdp-eks-{stack_run.stack}"), resource.name
