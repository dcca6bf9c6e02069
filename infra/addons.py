"""The EKS add-ons the stack installs: which, when, with what configuration and which pod identity.

Every add-on is an aws.eks.Addon the program registers itself (not pulumi-eks's defaults), so previews and
tests show it; versions come from stack/versions.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from infra.iam import PodIdentity, pod_identity_trust_policy, role_with_policies
from stack.names import GPU_TAINT_EFFECT, GPU_TAINT_KEY
from stack.versions import EKS_ADDONS


@dataclass(frozen=True)
class AddonSpec:
    name: str
    # Whether nodes need it before they can become Ready (pod networking, service routing, pod credentials).
    # The others run as Deployments and wait for the system nodes.
    before_nodes: bool
    identity: PodIdentity | None = None  # the service account that gets `policies` through EKS Pod Identity
    policies: tuple[str, ...] = ()
    configuration: dict[str, Any] = field(default_factory=dict)  # the add-on's configuration values


VPC_CNI = AddonSpec(
    "vpc-cni",
    before_nodes=True,
    # The CNI's node-role permissions move to its own role (EKS user guide, "Configure Amazon VPC CNI plugin":
    # "we recommend that you assign it to a separate role"); aws-node is the add-on's service account.
    identity=PodIdentity("kube-system", "aws-node"),
    policies=("AmazonEKS_CNI_Policy",),
    # The CNI's network policy agent enforces Kubernetes NetworkPolicies; the add-on's configuration key takes the
    # string "true" (EKS user guide, "Restrict Pod network traffic with Kubernetes network policies").
    configuration={"enableNetworkPolicy": "true"},
)
KUBE_PROXY = AddonSpec("kube-proxy", before_nodes=True)
POD_IDENTITY_AGENT = AddonSpec("eks-pod-identity-agent", before_nodes=True)
COREDNS = AddonSpec("coredns", before_nodes=False)
EBS_CSI = AddonSpec(
    "aws-ebs-csi-driver",
    before_nodes=False,
    identity=PodIdentity("kube-system", "ebs-csi-controller-sa"),
    policies=("service-role/AmazonEBSCSIDriverPolicy",),
)
# Mounts the checkpoint file system, a static PersistentVolume: no IAM needed to mount. Only with FSx.
FSX_CSI = AddonSpec("aws-fsx-csi-driver", before_nodes=False)
# The EKS node monitoring agent: a DaemonSet that reads each node's logs (kernel, NVIDIA XID and NVLink, EFA and
# interfaces, storage, container runtime) and sets the node conditions node auto repair acts on (infra/gpu_nodes.py;
# EKS user guide, "Detect node health issues with the EKS node monitoring agent"). No identity: "This add-on doesn't
# require additional permissions" (EKS user guide, "AWS add-ons", Node monitoring agent).
# Its chart (aws/eks-node-monitoring-agent, charts/eks-node-monitoring-agent/values.yaml) tolerates every taint for
# the agent (nodeAgent.tolerations: operator Exists) but none for its DCGM host engine (dcgmAgent.tolerations: []),
# which would then never run on the tainted GPU nodes and the agent's DCGM checks never report: the add-on's
# configuration gives it the GPU taint's toleration (dcgmAgent.tolerations, charts/configuration.schema.json).
NODE_MONITORING_AGENT = AddonSpec(
    "eks-node-monitoring-agent",
    before_nodes=False,
    configuration={
        "dcgmAgent": {"tolerations": [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": GPU_TAINT_EFFECT}]}
    },
)


def cluster_addons(with_fsx: bool) -> tuple[AddonSpec, ...]:
    return (
        VPC_CNI,
        KUBE_PROXY,
        POD_IDENTITY_AGENT,
        COREDNS,
        EBS_CSI,
        NODE_MONITORING_AGENT,
        *((FSX_CSI,) if with_fsx else ()),
    )


@dataclass(frozen=True)
class AddonTarget:
    """The cluster an add-on goes onto."""

    prefix: str  # Pulumi name prefix of the cluster component's resources
    cluster_name: str
    kubernetes_version: str
    cluster_arn: pulumi.Input[str]
    partition: pulumi.Input[str]
    parent: pulumi.Resource


def addon_version(name: str, kubernetes_version: str, parent: pulumi.Resource) -> pulumi.Input[str]:
    """The pinned version, or the default EKS publishes for the Kubernetes version (aws.eks.getAddonVersion)."""
    pinned = EKS_ADDONS[name]
    if pinned:
        return pinned
    return aws.eks.get_addon_version_output(
        addon_name=name,
        kubernetes_version=kubernetes_version,
        most_recent=False,
        opts=pulumi.InvokeOutputOptions(parent=parent),
    ).version


def eks_addon(spec: AddonSpec, target: AddonTarget, depends_on: list[pulumi.Resource]) -> aws.eks.Addon:
    extra: dict[str, Any] = {}
    granted: list[pulumi.Resource] = []
    if (identity := spec.identity) is not None:
        trust = pulumi.Output.from_input(target.cluster_arn).apply(lambda arn: pod_identity_trust_policy(identity, arn))
        role = role_with_policies(f"{target.prefix}-{spec.name}", trust, spec.policies, target.partition, target.parent)
        extra["pod_identity_associations"] = [
            {"role_arn": role.role.arn, "service_account": spec.identity.service_account}
        ]
        # The add-on's pods act with these policies from their first start to their last cleanup (the EBS CSI
        # controller deletes volumes while the platform goes): attached before it, detached after it.
        granted = list(role.attachments)
    if spec.configuration:
        extra["configuration_values"] = json.dumps(spec.configuration)
    return aws.eks.Addon(
        f"{target.prefix}-{spec.name}",
        cluster_name=target.cluster_name,
        addon_name=spec.name,
        addon_version=addon_version(spec.name, target.kubernetes_version, target.parent),
        # Take over whatever EKS or an earlier install left, so the first `pulumi up` never conflicts.
        resolve_conflicts_on_create="OVERWRITE",
        resolve_conflicts_on_update="OVERWRITE",
        # The cluster name is a plain string, so the dependency on the control plane is explicit.
        opts=pulumi.ResourceOptions(parent=target.parent, depends_on=[*depends_on, *granted]),
        **extra,
    )
