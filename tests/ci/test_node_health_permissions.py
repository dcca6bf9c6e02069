"""What node auto repair and the node monitoring agent ask of the CI deploy role (ci/deploy_policy.py): the node
group's repair config is set by CreateNodegroup and changed by UpdateNodegroupConfig (EKS API reference:
NodeRepairConfig is a member of both), the agent is an add-on like the others (CreateAddon on the cluster, UpdateAddon
and DeleteAddon on the add-on, its configuration read with DescribeAddonConfiguration), and the agent itself needs no
IAM role: nothing on another cluster, and nothing in IAM."""

from __future__ import annotations

from ci.deploy_policy import Account, deploy_policy
from infra.addons import NODE_MONITORING_AGENT
from stack.files import load_stack_config
from tests.ci.iam_eval import allowed

ACCOUNT = Account("123456789012")
DEPLOY = deploy_policy(ACCOUNT)
CLUSTER = load_stack_config("p5-16").cluster_name


def _eks(resource: str) -> str:
    return f"arn:aws:eks:us-east-1:123456789012:{resource}"


def test_the_deploy_role_sets_and_changes_the_gpu_groups_repair_config() -> None:
    assert allowed(DEPLOY, "eks:CreateNodegroup", _eks(f"cluster/{CLUSTER}"))
    assert allowed(DEPLOY, "eks:UpdateNodegroupConfig", _eks(f"nodegroup/{CLUSTER}/{CLUSTER}-gpu-x/uuid"))
    assert not allowed(DEPLOY, "eks:UpdateNodegroupConfig", _eks("nodegroup/payments/workers/uuid"))


def test_the_deploy_role_installs_the_monitoring_agent_on_the_stacks_cluster_only() -> None:
    addon = _eks(f"addon/{CLUSTER}/{NODE_MONITORING_AGENT.name}/uuid")
    assert allowed(DEPLOY, "eks:CreateAddon", _eks(f"cluster/{CLUSTER}"))
    for action in ("eks:DescribeAddon", "eks:UpdateAddon", "eks:DeleteAddon"):
        assert allowed(DEPLOY, action, addon), action
    assert allowed(DEPLOY, "eks:DescribeAddonConfiguration", "*")
    assert not allowed(DEPLOY, "eks:CreateAddon", _eks("cluster/payments"))
    assert not allowed(DEPLOY, "eks:DeleteAddon", _eks(f"addon/payments/{NODE_MONITORING_AGENT.name}/uuid"))


def test_the_monitoring_agent_needs_no_role() -> None:
    assert NODE_MONITORING_AGENT.identity is None and NODE_MONITORING_AGENT.policies == ()
