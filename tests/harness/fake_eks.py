"""What pulumi-eks 4.4.0's components return, and which inputs they or the EKS API refuse.

Remote components register as one resource under mocks, so their outputs must be computed here the way
pulumi-eks computes them (github.com/pulumi/pulumi-eks, nodejs/eks/cluster/cluster.ts `createCore` and
`createCluster`, nodejs/eks/nodes/nodegroup.ts `createManagedNodeGroup`):

- pulumi-eks creates its own control-plane security group `<name>-eksClusterSecurityGroup` and a node security
  group unless `skipDefaultSecurityGroups` is set. `clusterSecurityGroupId` is its own group when it made one,
  otherwise `eksCluster.vpcConfig.clusterSecurityGroupId`: the group EKS itself creates. The two are different
  groups, and only EKS's is given to the nodes of a managed node group without security groups in its template.
- `oidcProviderArn` is "" unless `createOidcProvider`.
- `kubeconfig` is generateKubeconfig's (cluster.ts): a user that runs `aws --region R eks get-token --cluster-name N
  --output json`, with KUBERNETES_EXEC_INFO set for the AWS CLI.
- A ManagedNodeGroup passes its arguments through to an aws.eks.NodeGroup named like the component; it refuses a
  launch template together with any of the options that need its own template.

- A ManagedNodeGroup without `version` gets the cluster's version from pulumi-eks only when it has no launch
  template (createManagedNodeGroup: `if (!args.version && !args.launchTemplate)`); with one, the aws.eks.NodeGroup
  has no version, EKS creates it at the control plane's version of that day and keeps it there through upgrades.
- With `authenticationMode` set, pulumi-eks creates the cluster with `bootstrapClusterCreatorAdminPermissions: true`
  (cluster.ts createCluster), so EKS makes an access entry for the principal that creates the cluster: the role
  behind the caller's assumed-role session. A second entry for that principal is refused.

An existing cluster (cluster.existing) is read with the aws.eks.getCluster data source: `describe_cluster` answers
it with every field of pulumi-aws 7.51.1's GetClusterResult (pulumi_aws/eks/get_cluster.py and the GetCluster*Result
types of pulumi_aws/eks/outputs.py), with the values EKS gives a cluster in API authentication mode.

The EKS API's own refusals for a node group with a launch template are modelled too (EKS user guide,
"Customize managed nodes with launch templates" and "Create a managed node group with Capacity Blocks for ML"), and
the AWS provider's limit on a node group name prefix (terraform-provider-aws internal/service/eks/node_group.go:
63 characters less the 26 of the unique suffix it appends).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.harness.fake_ids import ACCOUNT, arn, auto_name, digest, ec2_id, key_uuid, prefixed_unique_id

# nodejs/eks/nodes/nodegroup.ts customUserDataArgs and customLaunchTemplateArgs: options for which pulumi-eks
# writes its own user data, and builds its own launch template.
CUSTOM_USER_DATA_ARGS = ("kubeletExtraArgs", "bootstrapExtraArgs", "bottlerocketSettings", "nodeadmExtraOptions")
CUSTOM_LAUNCH_TEMPLATE_ARGS = (*CUSTOM_USER_DATA_ARGS, "enableIMDSv2", "userData", "amiId", "enableEfaSupport")
# The @pulumi/aws version pulumi-eks 4.4.0 is built with (nodejs/eks/package.json; its Python SDK requires
# pulumi-aws>=7.25.0 accordingly): the engine stamps it on the resource references the components return, and
# the program's pulumi-aws must satisfy it for the reference to become a resource object.
AWS_PACKAGE_VERSION = "7.25.0"
# EKS's default service CIDR when none is given (EKS API reference, KubernetesNetworkConfigRequest).
SERVICE_CIDR = "172.20.0.0/16"
NODE_GROUP_NAME_PREFIX_MAX = 63 - 26
# The principal the fake's getCallerIdentity answers for (fake_aws.py): the role behind the deploying session.
CREATOR_ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/deployer"


class ProviderRefusalError(Exception):
    """What the provider or the AWS API answers to a request it refuses."""


@dataclass
class Child:
    """A resource a component creates and returns as an output (a resource reference)."""

    type: str
    name: str
    id: str
    state: dict[str, Any] = field(default_factory=dict)


def cluster_outputs(name: str, inputs: dict[str, Any], region: str) -> dict[str, Any]:
    if inputs.get("publicAccessCidrs") and inputs.get("endpointPublicAccess") is False:
        raise ProviderRefusalError("`publicAccessCidrs` can only be set when `endpointPublicAccess` is true")
    if inputs.get("authenticationMode"):
        for entry in (inputs.get("accessEntries") or {}).values():
            # The same role whatever its path: a role's name is unique in its account (IAM user guide, IAM identifiers).
            principal = str(entry.get("principalArn"))
            if principal.startswith(CREATOR_ROLE_ARN.split("role/")[0]) and principal.endswith("/deployer"):
                raise ProviderRefusalError(
                    "ResourceInUseException: The specified access entry resource is already in use on this cluster."
                )
    cluster_name = inputs.get("name") or auto_name(f"{name}-eksCluster")
    eks_group = ec2_id("sg", name, "eks-created")
    own_groups = not inputs.get("skipDefaultSecurityGroups")
    cluster_group = (
        Child(
            "aws:ec2/securityGroup:SecurityGroup",
            f"{name}-eksClusterSecurityGroup",
            ec2_id("sg", name, "pulumi-eks-cluster"),
        )
        if own_groups
        else None
    )
    node_group = (
        Child("aws:ec2/securityGroup:SecurityGroup", f"{name}-nodeSecurityGroup", ec2_id("sg", name, "pulumi-eks-node"))
        if own_groups
        else None
    )
    ingress_rule = ec2_id("sgr", name, "eksClusterIngressRule") if own_groups else ""
    endpoint = cluster_endpoint(name, region)
    issuer = f"https://oidc.eks.{region}.amazonaws.com/id/{digest('oidc', name)[:32].upper()}"
    ca_data = certificate_authority(cluster_name)
    eks_cluster = Child(
        "aws:eks/cluster:Cluster",
        f"{name}-eksCluster",
        cluster_name,
        {
            "name": cluster_name,
            "arn": arn("eks", region, f"cluster/{cluster_name}"),
            "endpoint": endpoint,
            "version": inputs.get("version"),
            "status": "ACTIVE",
            "platformVersion": "eks.1",
            "certificateAuthority": {"data": ca_data},
            "identities": [{"oidcs": [{"issuer": issuer}]}],
            "kubernetesNetworkConfig": {"ipFamily": "ipv4", "serviceIpv4Cidr": SERVICE_CIDR},
            "accessConfig": {"authenticationMode": inputs.get("authenticationMode", "CONFIG_MAP")},
            "vpcConfig": {
                "clusterSecurityGroupId": eks_group,
                "securityGroupIds": [cluster_group.id] if cluster_group else [],
                "subnetIds": [*inputs.get("privateSubnetIds", []), *inputs.get("publicSubnetIds", [])],
                "vpcId": inputs.get("vpcId"),
                "endpointPrivateAccess": bool(inputs.get("endpointPrivateAccess")),
                "endpointPublicAccess": inputs.get("endpointPublicAccess", True),
                "publicAccessCidrs": inputs.get("publicAccessCidrs") or ["0.0.0.0/0"],
            },
        },
    )
    kubeconfig = {
        "apiVersion": "v1",
        "clusters": [{"cluster": {"server": endpoint, "certificate-authority-data": ca_data}, "name": "kubernetes"}],
        "contexts": [{"context": {"cluster": "kubernetes", "user": "aws"}, "name": "aws"}],
        "current-context": "aws",
        "kind": "Config",
        "users": [
            {
                "name": "aws",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "aws",
                        "args": [
                            "--region",
                            region,
                            "eks",
                            "get-token",
                            "--cluster-name",
                            cluster_name,
                            "--output",
                            "json",
                        ],
                        "env": [
                            {
                                "name": "KUBERNETES_EXEC_INFO",
                                "value": '{"apiVersion": "client.authentication.k8s.io/v1beta1"}',
                            }
                        ],
                    }
                },
            }
        ],
    }
    oidc = bool(inputs.get("createOidcProvider"))
    return {
        "eksCluster": eks_cluster,
        "clusterSecurityGroup": cluster_group,
        "nodeSecurityGroup": node_group,
        "clusterSecurityGroupId": cluster_group.id if cluster_group else eks_group,
        "nodeSecurityGroupId": node_group.id if node_group else eks_group,
        "clusterIngressRuleId": ingress_rule,
        "eksClusterIngressRule": None,
        "kubeconfig": kubeconfig,
        "kubeconfigJson": json.dumps(kubeconfig),
        "instanceRoles": [],
        "defaultNodeGroup": None,
        "defaultNodeGroupAsgName": "",
        "fargateProfileId": "",
        "fargateProfileStatus": "",
        "autoModeNodeRoleName": "",
        "oidcProviderArn": f"arn:aws:iam::{ACCOUNT}:oidc-provider/{issuer.removeprefix('https://')}" if oidc else "",
        "oidcProviderUrl": issuer,
        "oidcIssuer": issuer.removeprefix("https://"),
    }


def describe_cluster(args: Mapping[str, Any], region: str) -> dict[str, Any]:
    """aws:eks/getCluster:getCluster for a cluster the stack does not manage, in the wire form (camelCase) the
    provider returns. As GetClusterResult types them, the nested blocks are lists (of one, when EKS has the setting)
    and vpcConfig alone is an object; a private-endpoint cluster in API authentication mode with the AWS-managed
    control-plane egress, the standard scaling tier and standard support."""
    cluster_name = str(args["name"])
    region = str(args.get("region") or region)
    issuer = f"https://oidc.eks.{region}.amazonaws.com/id/{digest('oidc', cluster_name)[:32].upper()}"
    return {
        "id": cluster_name,
        "name": cluster_name,
        "region": region,
        "arn": arn("eks", region, f"cluster/{cluster_name}"),
        "clusterId": "",  # only for a local cluster on Outposts
        "createdAt": "2026-01-05T09:30:00Z",
        "deletionProtection": False,
        "endpoint": cluster_endpoint(cluster_name, region),
        "certificateAuthorities": [{"data": certificate_authority(cluster_name)}],
        "identities": [{"oidcs": [{"issuer": issuer}]}],
        "accessConfigs": [{"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": True}],
        "computeConfigs": [],
        "controlPlaneScalingConfigs": [{"tier": "standard"}],
        "enabledClusterLogTypes": [],
        "kubeApiServerConfigs": [],
        "kubeControllerManagerConfigs": [],
        "kubeSchedulerConfigs": [],
        "kubernetesNetworkConfigs": [
            {
                "elasticLoadBalancings": [{"enabled": False}],
                "ipFamily": "ipv4",
                "serviceIpv4Cidr": SERVICE_CIDR,
                "serviceIpv6Cidr": "",
            }
        ],
        "outpostConfigs": [],
        "platformVersion": "eks.1",
        "remoteNetworkConfigs": [],
        "roleArn": f"arn:aws:iam::{ACCOUNT}:role/{cluster_name}-cluster",
        "status": "ACTIVE",
        "storageConfigs": [],
        "tags": {},
        "upgradePolicies": [{"supportType": "STANDARD"}],
        "version": "1.35",
        "vpcConfig": {
            "clusterSecurityGroupId": ec2_id("sg", cluster_name, "eks-created"),
            "controlPlaneEgressMode": "AWS_MANAGED",
            "endpointPrivateAccess": True,
            "endpointPublicAccess": False,
            "publicAccessCidrs": [],
            "securityGroupIds": [],
            "subnetIds": [ec2_id("subnet", cluster_name, "a"), ec2_id("subnet", cluster_name, "b")],
            "vpcId": ec2_id("vpc", cluster_name),
        },
        "zonalShiftConfigs": [],
    }


def cluster_endpoint(key: str, region: str) -> str:
    return f"https://{digest('endpoint', key)[:32].upper()}.gr7.{region}.eks.amazonaws.com"


def certificate_authority(cluster_name: str) -> str:
    """A stand-in for the cluster's base64 PEM CA certificate: a public fact of the cluster, like its endpoint."""
    return base64.b64encode(f"certificate of {cluster_name}".encode()).decode()


def node_group_outputs(
    name: str,
    inputs: dict[str, Any],
    region: str,
    cluster: tuple[str, str | None],
    template: dict[str, Any] | None,
) -> dict[str, Any]:
    """`cluster`: the EKS cluster's name and Kubernetes version; `template`: the launch template's inputs when the
    group names one of the stack's templates."""
    _check_node_group(inputs, template)
    cluster_name, cluster_version = cluster
    group_name = (
        inputs.get("nodeGroupName")
        or (prefixed_unique_id(inputs["nodeGroupNamePrefix"], name) if inputs.get("nodeGroupNamePrefix") else None)
        or auto_name(name)
    )
    passed = {k: v for k, v in inputs.items() if k not in ("cluster", "nodeRole", *CUSTOM_LAUNCH_TEMPLATE_ARGS)}
    if not inputs.get("version") and not inputs.get("launchTemplate"):
        passed["version"] = cluster_version  # pulumi-eks's default; with a launch template the group gets none
    node_group = Child(
        "aws:eks/nodeGroup:NodeGroup",
        name,
        f"{cluster_name}:{group_name}",
        {
            **passed,
            "clusterName": cluster_name,
            "nodeGroupName": group_name,
            "arn": arn("eks", region, f"nodegroup/{cluster_name}/{group_name}/{key_uuid(name)}"),
            "status": "ACTIVE",
            "resources": [{"autoscalingGroups": [{"name": f"eks-{group_name}-{key_uuid(name, 'asg')}"}]}],
        },
    )
    return {"nodeGroup": node_group, "placementGroupName": ""}


def check_managed_node_group_args(inputs: Mapping[str, Any]) -> None:
    """pulumi-eks's own validation of a ManagedNodeGroup's arguments, which runs in every preview
    (nodejs/eks/nodes/nodegroup.ts createManagedNodeGroup)."""
    if inputs.get("nodeRole") and inputs.get("nodeRoleArn"):
        raise ProviderRefusalError("You cannot specify both nodeRole and nodeRoleArn for a managed node group.")
    for key in ("gpu", "amiType"):
        if inputs.get("amiId") and inputs.get(key):
            raise ProviderRefusalError(f"You cannot specify both amiId and {key} when creating a managed node group.")
    if not inputs.get("nodeRole") and not inputs.get("nodeRoleArn"):
        raise ProviderRefusalError("An IAM role, or role ARN must be provided to create a managed node group")
    custom = [key for key in CUSTOM_LAUNCH_TEMPLATE_ARGS if inputs.get(key) is not None]
    if inputs.get("launchTemplate") and custom:
        raise ProviderRefusalError(f"If you provide a custom launch template, you cannot provide any of {custom}.")
    if inputs.get("userData") and any(inputs.get(key) is not None for key in CUSTOM_USER_DATA_ARGS):
        raise ProviderRefusalError(f"If you provide custom userData, you cannot provide any of {CUSTOM_USER_DATA_ARGS}")


def _check_node_group(inputs: dict[str, Any], template: dict[str, Any] | None) -> None:
    check_managed_node_group_args(inputs)
    if inputs.get("nodeGroupName") and inputs.get("nodeGroupNamePrefix"):
        raise ProviderRefusalError('"node_group_name": conflicts with node_group_name_prefix')
    prefix = inputs.get("nodeGroupNamePrefix") or ""
    if len(prefix) > NODE_GROUP_NAME_PREFIX_MAX:
        raise ProviderRefusalError(
            f"expected length of node_group_name_prefix to be in the range (0 - {NODE_GROUP_NAME_PREFIX_MAX}), "
            f"got {prefix}"
        )
    if template is None:
        if inputs.get("capacityType") == "CAPACITY_BLOCK":
            raise ProviderRefusalError("InvalidRequestException: Capacity Blocks need a launch template")
        return
    if inputs.get("diskSize") is not None:
        raise ProviderRefusalError("InvalidRequestException: Disk size must be specified within the launch template.")
    if inputs.get("instanceTypes") and template.get("instanceType"):
        raise ProviderRefusalError(
            "InvalidRequestException: Cannot specify instance types in launch template and API request"
        )
    interfaces = template.get("networkInterfaces") or []
    if template.get("vpcSecurityGroupIds") and any(i.get("securityGroups") for i in interfaces):
        raise ProviderRefusalError("InvalidParameterCombination: security groups on the instance and its interfaces")
    if any(i.get("subnetId") for i in interfaces) or template.get("iamInstanceProfile"):
        raise ProviderRefusalError("InvalidRequestException: the launch template sets a subnet or an instance profile")
    if inputs.get("capacityType") == "CAPACITY_BLOCK":
        market = (template.get("instanceMarketOptions") or {}).get("marketType")
        target = (template.get("capacityReservationSpecification") or {}).get("capacityReservationTarget") or {}
        if market != "capacity-block" or not target.get("capacityReservationId") or not template.get("instanceType"):
            raise ProviderRefusalError(
                "InvalidRequestException: a CAPACITY_BLOCK node group needs a launch template with market type "
                "capacity-block, the block's reservation id and the instance type"
            )
