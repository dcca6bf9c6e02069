"""What a remote component's provider registers, as the engine shows it to a policy pack.

Under the SDK's mocks a remote component (pulumi-eks's Cluster and ManagedNodeGroup, pulumi-kubernetes's kustomize
v2 Directory) is one registration with the program's inputs and no children. The engine never analyzes that
registration: it calls the provider's Construct instead (pulumi/pulumi pkg/resource/deploy/source_eval.go, "Remote
components don't go through the step generator"), and what the pack sees is what the provider's own code registers:

- the component itself, registered by pulumi-eks's Node.js provider with no inputs: its bundled @pulumi/pulumi is
  3.173.0 (nodejs/eks/yarn.lock), whose ComponentResource sends `{}` as the inputs of a component that is not itself
  remote (sdk/nodejs/resource.ts at v3.173.0), and with the outputs its construct returns;
- its children, with the inputs the provider's code gives them.

Each model below reads the component's recorded inputs and returns the children that code would register, for the
resources the pack has policies about (node groups, launch templates). A component the model cannot follow (an
option that makes the provider create something the model does not build) raises NotModeledError, so a program change
shows up as a failing test rather than as a child the pack silently never sees.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi_aws as aws
from pulumi._types import input_type_py_to_pulumi_names
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

from tests.harness.fake_eks import (
    CUSTOM_LAUNCH_TEMPLATE_ARGS,
    CUSTOM_USER_DATA_ARGS,
    check_managed_node_group_args,
)
from tests.harness.pulumi_program import Registered

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
SERVICE_ROLE = "eks:index:ServiceRole"
ROLE = "aws:iam/role:Role"
# The inputs aws.eks.NodeGroup takes; pulumi-eks spreads its args into that constructor, which keeps only these.
NODE_GROUP_INPUTS = frozenset(input_type_py_to_pulumi_names(aws.eks.NodeGroupArgs).values())


class NotModeledError(Exception):
    """The component uses an option whose children this harness does not build."""


@dataclass(frozen=True)
class Child:
    type: str
    name: str
    inputs: dict[str, Any]
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)


def is_unknown(value: Any) -> bool:
    """Unknown in the engine's sense: the value, or anything inside it (Node.js `pulumi.output` of a list with one
    unknown element is unknown as a whole)."""
    if value == UNKNOWN_STRING_VALUE:
        return True
    if isinstance(value, Mapping):
        return any(is_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(is_unknown(v) for v in value)
    return False


def managed_node_group_children(component: Registered, inputs: Mapping[str, Any]) -> list[Child]:
    """pulumi-eks createManagedNodeGroup (nodejs/eks/nodes/nodegroup.ts): one aws.eks.NodeGroup named like the
    component, plus a launch template of its own when a custom-template option is set. Arguments pulumi-eks refuses
    (a launch template of the program's together with a custom-template option, both or neither node role) raise its
    refusal, as the preview would fail. The node group gets what the program gives: a name prefix, the program's
    launch template, no instance types where a capacity block names its type in that template."""
    check_managed_node_group_args(inputs)
    if inputs.get("enableEfaSupport"):
        raise NotModeledError("enableEfaSupport: pulumi-eks then adds a placement group and EFA interfaces of its own")
    if inputs.get("operatingSystem") is not None and inputs.get("amiType") is None:
        raise NotModeledError("operatingSystem without amiType: pulumi-eks then derives the AMI type itself")
    deps = component.property_dependencies
    children: list[Child] = []
    group = {k: v for k, v in inputs.items() if k in NODE_GROUP_INPUTS}
    group_deps = {k: list(deps.get(k, [])) for k in group}
    if inputs.get("version") is None and inputs.get("launchTemplate") is None:
        # Without a launch template of the program's, the group follows the cluster's Kubernetes version output.
        group["version"] = UNKNOWN_STRING_VALUE
        group_deps["version"] = list(deps.get("cluster", []))
    custom_template = any(inputs.get(k) is not None for k in CUSTOM_LAUNCH_TEMPLATE_ARGS)
    if custom_template:
        template = Child(LAUNCH_TEMPLATE, f"{component.name}-launchTemplate", _custom_launch_template(inputs))
        children.append(template)
        group.pop("diskSize", None)  # the disk size moves into the template
        group["launchTemplate"] = {"id": UNKNOWN_STRING_VALUE, "version": UNKNOWN_STRING_VALUE}
        group_deps["launchTemplate"] = [_child_urn(component, template)]
    if any(inputs.get(k) is not None for k in (*CUSTOM_USER_DATA_ARGS, "userData", "amiId")):
        for key in ("version", "releaseVersion", "amiType"):
            group.pop(key, None)
    group["clusterName"] = inputs.get("clusterName", UNKNOWN_STRING_VALUE)  # else the cluster's name output
    group_deps["clusterName"] = list(deps.get("clusterName", deps.get("cluster", [])))
    # nodeRoleArn is given, or read from the role's `arn` output; the view does not carry outputs.
    group["nodeRoleArn"] = inputs.get("nodeRoleArn", UNKNOWN_STRING_VALUE)
    group_deps["nodeRoleArn"] = list(deps.get("nodeRoleArn", deps.get("nodeRole", [])))
    group["scalingConfig"] = _scaling_config(inputs.get("scalingConfig"))
    subnets = inputs.get("subnetIds")
    group["subnetIds"] = UNKNOWN_STRING_VALUE if subnets is None or is_unknown(subnets) else subnets
    group_deps["subnetIds"] = list(deps.get("subnetIds", deps.get("cluster", [])))
    children.append(Child(NODE_GROUP, component.name, group, group_deps))
    return children


def _scaling_config(given: Any) -> Any:
    """pulumi-eks fills the sizes it is not given: desired 2, min 1, max 2."""
    if is_unknown(given):
        return UNKNOWN_STRING_VALUE
    given = given or {}
    defaults = {"desiredSize": 2.0, "minSize": 1.0, "maxSize": 2.0}
    return {key: given.get(key, default) for key, default in defaults.items()}


def _custom_launch_template(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """createMNGCustomLaunchTemplate: IMDS options only when enableIMDSv2 is given, with hop limit 2."""
    template: dict[str, Any] = {}
    if inputs.get("enableIMDSv2") is not None:
        template["metadataOptions"] = {
            "httpTokens": "required" if inputs["enableIMDSv2"] else "optional",
            "httpPutResponseHopLimit": 2.0,
            "httpEndpoint": "enabled",
        }
    if inputs.get("diskSize") is not None:
        template["blockDeviceMappings"] = [
            {"deviceName": UNKNOWN_STRING_VALUE, "ebs": {"volumeSize": inputs["diskSize"]}}
        ]
    return template


def cluster_children(component: Registered, inputs: Mapping[str, Any]) -> list[Child]:
    """pulumi-eks Cluster (nodejs/eks/cluster/cluster.ts): without a default node group, its children the pack has
    policies about are the IAM roles it makes: the cluster's service role unless the program gives `serviceRole`,
    and the instance role only with `createInstanceRole`. The control plane, its security groups and add-ons carry no
    policy. The default node group (launch template, autoscaling group) and the aws-auth ConfigMap are not built
    here."""
    if not inputs.get("skipDefaultNodeGroup") and not inputs.get("fargate"):
        raise NotModeledError("a default node group: its launch template is one the pack checks")
    if inputs.get("authenticationMode") != "API":
        raise NotModeledError("the aws-auth ConfigMap pulumi-eks writes unless authenticationMode is API")
    if (inputs.get("autoMode") or {}).get("enabled"):
        raise NotModeledError("EKS Auto Mode: pulumi-eks then makes a node role of its own")
    children: list[Child] = []
    if inputs.get("serviceRole") is None:
        # "All aws partitions use same service for eks"; Auto Mode's TagSession is asked for in every case.
        children += service_role(
            f"{component.name}-eksRole", "eks.amazonaws.com", ["sts:AssumeRole", "sts:TagSession"], inputs
        )
    if inputs.get("createInstanceRole"):
        children += service_role(f"{component.name}-instanceRole", "ec2.amazonaws.com", None, inputs)
    return children


def service_role(name: str, service: str, actions: list[str] | None, inputs: Mapping[str, Any]) -> list[Child]:
    """pulumi-eks ServiceRole (nodejs/eks/servicerole.ts): a component without inputs and its aws.iam.Role named
    `${name}-role`, whose trust policy is `JSON.stringify` of one statement for the service, known during a preview
    (a literal service name). The role's URN here names the cluster as its parent's type (no policy reads the chain);
    the managed policy attachments carry no policy and are not built."""
    document = {
        "Version": "2012-10-17",
        "Statement": [
            {"Action": actions or ["sts:AssumeRole"], "Effect": "Allow", "Principal": {"Service": [service]}}
        ],
    }
    role = {"assumeRolePolicy": json.dumps(document, separators=(",", ":"))}
    if inputs.get("tags") is not None:
        role["tags"] = inputs["tags"]
    return [Child(SERVICE_ROLE, name, {}), Child(ROLE, f"{name}-role", role)]


def _child_urn(component: Registered, child: Child) -> str:
    head, type_chain, _name = component.urn.rsplit("::", 2)
    return f"{head}::{type_chain}${child.type}::{child.name}"


ChildModel = Callable[[Registered, Mapping[str, Any]], list[Child]]
CHILD_MODELS: dict[str, ChildModel] = {
    "eks:index:ManagedNodeGroup": managed_node_group_children,
    "eks:index:Cluster": cluster_children,
}
# Remote components whose children the harness does not build, and why the pack loses nothing by that.
NOT_MODELED: dict[str, str] = {
    "kubernetes:kustomize/v2:Directory": (
        "the Kubeflow Training Operator's upstream manifests, fetched from GitHub at preview time: its Deployment, "
        "ClusterIP Service, RBAC and CRDs; no Grafana, Prometheus or etcd endpoint and no Hugging Face token"
    ),
}
# What each construct returns as the component's outputs (pulumi-eks nodejs/eks/cmd/provider/*.ts `state`).
REMOTE_OUTPUTS: dict[str, tuple[str, ...]] = {
    "eks:index:ManagedNodeGroup": ("nodeGroup", "placementGroupName"),
    "eks:index:Cluster": (
        "kubeconfig",
        "kubeconfigJson",
        "clusterSecurityGroup",
        "instanceRoles",
        "nodeSecurityGroup",
        "eksClusterIngressRule",
        "defaultNodeGroup",
        "eksCluster",
        "core",
        "clusterSecurityGroupId",
        "nodeSecurityGroupId",
        "clusterIngressRuleId",
        "defaultNodeGroupAsgName",
        "fargateProfileId",
        "fargateProfileStatus",
        "oidcProviderArn",
        "oidcProviderUrl",
        "oidcIssuer",
        "autoModeNodeRoleName",
    ),
    "kubernetes:kustomize/v2:Directory": ("resources",),
}


def children(component: Registered, inputs: Mapping[str, Any]) -> tuple[list[Child], list[str]]:
    """The children of a remote component and their URNs."""
    model = CHILD_MODELS.get(component.type)
    if model is None:
        if component.type in NOT_MODELED:
            return [], []
        raise NotModeledError(f"{component.type}: no model of the children its provider registers")
    built = model(component, inputs)
    return built, [_child_urn(component, c) for c in built]
