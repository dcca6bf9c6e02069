"""What the program registers for the GPU node group's autoscaling (stack/gpu_autoscaling.py): the group's bounds and
tags, the Cluster Autoscaler's chart scaling that group's Auto Scaling group alone, and its role, whose writes reach
that group alone. tests/local/test_autoscaler_drill.py drills what the autoscaler then does."""

from __future__ import annotations

import json

import pytest

from stack.config import KUBERNETES_VERSIONS
from stack.fields import NAMESPACE
from stack.files import load_stack_config, raw_stack_config
from stack.gpu_autoscaling import NODE_TEMPLATE_RESOURCE_TAG
from stack.node_contract import AUTOSCALER_GPU_LABEL, EFA_HUGEPAGES_MIB
from stack.versions import CLUSTER_AUTOSCALER_IMAGE_TAGS
from tests.harness.pulumi_program import ProgramRun, Registered, run_program
from tests.infra.existing_cluster_stack import run_existing_cluster
from trainer.base.pod.bad_node import BAD_NODE_TAINT_KEY

pytestmark = pytest.mark.program  # runs __main__.py under the mocks

STACK = "p5-2"
GROUP = "eks:index:ManagedNodeGroup"
RELEASE = "kubernetes:helm.sh/v3:Release"
POLICY = "aws:iam/policy:Policy"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"


def _gpu_group(run: ProgramRun) -> Registered:
    return run.named(GROUP, "gpu-nodes")


def _autoscaler_releases(run: ProgramRun) -> list[Registered]:
    return [r for r in run.of_type(RELEASE) if r.inputs.get("chart") == "cluster-autoscaler"]


def _asg(run: ProgramRun) -> str:
    (resources,) = _gpu_group(run).outputs["nodeGroup"]["resources"]
    return resources["autoscalingGroups"][0]["name"]


def test_the_gpu_group_scales_from_zero_to_count_plus_spares_and_pulumi_leaves_its_size_to_the_autoscaler() -> None:
    run = run_program(STACK)
    assert run.error is None, run.error
    gpu = load_stack_config(STACK).gpu_nodes
    inputs = _gpu_group(run).inputs
    assert inputs["scalingConfig"] == {"minSize": 0, "desiredSize": gpu.count, "maxSize": gpu.count + gpu.spares}
    assert inputs["ignoreScalingChanges"] is True
    assert inputs["labels"][AUTOSCALER_GPU_LABEL] == "nvidia-h100"
    assert inputs["tags"][f"{NODE_TEMPLATE_RESOURCE_TAG}vpc.amazonaws.com/efa"] == str(gpu.instance.efa_interfaces)
    assert inputs["tags"][f"{NODE_TEMPLATE_RESOURCE_TAG}hugepages-2Mi"] == f"{EFA_HUGEPAGES_MIB}Mi"


def test_the_autoscaler_scales_the_gpu_groups_auto_scaling_group_alone_with_the_bad_node_taint_as_status() -> None:
    run = run_program(STACK)
    (release,) = _autoscaler_releases(run)
    values = release.inputs["values"]
    gpu = load_stack_config(STACK).gpu_nodes
    assert values["autoscalingGroups"] == [{"name": _asg(run), "minSize": 0, "maxSize": gpu.count + gpu.spares}]
    assert values["extraArgs"]["status-taint"] == BAD_NODE_TAINT_KEY
    assert values["awsRegion"] == "us-east-1" and values["image"]["tag"] == CLUSTER_AUTOSCALER_IMAGE_TAGS["1.35"]
    assert values["nodeSelector"] == {"fsdp-eks/node-group": "system"}


def test_the_autoscalers_role_writes_to_the_gpu_group_only_and_its_service_account_gets_it() -> None:
    run = run_program(STACK)
    (policy,) = [p for p in run.of_type(POLICY) if p.name == "autoscaler-policy"]
    document = json.loads(policy.inputs["policy"])
    (writes,) = [s for s in document["Statement"] if "autoscaling:SetDesiredCapacity" in s["Action"]]
    assert writes["Resource"].endswith(f":autoScalingGroup:*:autoScalingGroupName/{_asg(run)}")
    (association,) = [a for a in run.of_type(ASSOCIATION) if a.name == "autoscaler-association"]
    assert (association.inputs["namespace"], association.inputs["serviceAccount"]) == (
        "kube-system",
        "cluster-autoscaler",
    )


def test_a_reservation_keeps_its_nodes_and_a_group_with_no_room_gets_no_autoscaler() -> None:
    reserved = run_program("p4de-16")
    gpu = load_stack_config("p4de-16").gpu_nodes
    assert gpu.capacity_reservation_id and gpu.keeps_idle_nodes
    assert _gpu_group(reserved).inputs["scalingConfig"]["minSize"] == gpu.count
    raw = raw_stack_config(STACK)
    fixed = {f"{NAMESPACE}:gpuNodes": {**raw[f"{NAMESPACE}:gpuNodes"], "spares": 0, "keepIdleNodes": True}}
    run = run_program(STACK, fixed)
    assert run.error is None, run.error
    assert _autoscaler_releases(run) == [] and not _gpu_group(run).inputs.get("ignoreScalingChanges")


def test_an_existing_cluster_gets_no_autoscaler() -> None:
    assert _autoscaler_releases(run_existing_cluster()) == []


def test_every_kubernetes_version_has_the_autoscalers_image_of_its_minor() -> None:
    assert set(CLUSTER_AUTOSCALER_IMAGE_TAGS) == set(KUBERNETES_VERSIONS)
    assert all(tag.startswith(f"v{version}.") for version, tag in CLUSTER_AUTOSCALER_IMAGE_TAGS.items())
