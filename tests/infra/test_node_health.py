"""Node health on the cluster: the GPU node group repairs itself (EKS node auto repair, gpuNodes.autoRepair) and the
EKS node monitoring agent, whose node conditions the repair acts on, runs on every node, its DCGM host engine on the
tainted GPU nodes too."""

from __future__ import annotations

import json

import pytest

from infra.addons import NODE_MONITORING_AGENT
from infra.gpu_nodes import EKS_NODE_GROUP
from stack.files import raw_stack_config
from stack.node_contract import EKS_TAINT_EFFECTS, GPU_TAINT
from tests.harness.input_types import check_resource_inputs
from tests.harness.pulumi_program import ProgramRun, run_program

pytestmark = pytest.mark.program  # every test here runs __main__.py under the mocks

GPU = "fsdp-eks:gpuNodes"
NODE_GROUP = "eks:index:ManagedNodeGroup"
ADDON = "aws:eks/addon:Addon"


def _repair(run: ProgramRun, group: str = "gpu-nodes") -> object:
    """The nodeRepairConfig of the aws.eks.NodeGroup the ManagedNodeGroup created (after the stack's transforms)."""
    node_group = run.named(NODE_GROUP, group).outputs["nodeGroup"]
    assert node_group["$child"] == EKS_NODE_GROUP
    return node_group.get("nodeRepairConfig")


def test_the_gpu_node_group_repairs_its_nodes_by_default(stack_run: ProgramRun) -> None:
    assert _repair(stack_run) == {"enabled": True}
    assert _repair(stack_run, "cluster-system") is None  # the system nodes are the EKS default's: no repair


def test_auto_repair_can_be_switched_off() -> None:
    run = run_program("dev", {GPU: raw_stack_config("dev")[GPU] | {"autoRepair": False}})
    assert run.error is None, run.error
    assert _repair(run) == {"enabled": False}


def test_the_repair_config_is_one_the_pinned_pulumi_aws_accepts(stack_run: ProgramRun) -> None:
    """The transform writes the engine's names (pulumi-eks passes them through); the SDK's Args type must know them."""
    assert check_resource_inputs(EKS_NODE_GROUP, {"nodeRepairConfig": _repair(stack_run)}) == []


def test_the_monitoring_agent_runs_after_the_system_nodes_with_no_identity(stack_run: ProgramRun) -> None:
    (agent,) = [r for r in stack_run.of_type(ADDON) if r.inputs["addonName"] == NODE_MONITORING_AGENT.name]
    assert "podIdentityAssociations" not in agent.inputs  # "doesn't require additional permissions"
    system = stack_run.named(NODE_GROUP, "cluster-system")
    assert system.urn in agent.dependencies


def test_the_agents_dcgm_host_engine_tolerates_the_gpu_nodes_taint(stack_run: ProgramRun) -> None:
    (agent,) = [r for r in stack_run.of_type(ADDON) if r.inputs["addonName"] == NODE_MONITORING_AGENT.name]
    tolerations = json.loads(agent.inputs["configurationValues"])["dcgmAgent"]["tolerations"]
    assert any(
        t["key"] == GPU_TAINT["key"]
        and EKS_TAINT_EFFECTS[t["effect"]] == GPU_TAINT["effect"]
        and (t["operator"] == "Exists" or t.get("value") == GPU_TAINT["value"])
        for t in tolerations
    )
