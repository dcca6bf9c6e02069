"""The EKS cluster: control plane, CPU system node group, EKS add-ons; or an existing cluster by kubeconfig."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from infra.config import ClusterConfig
from infra.iam import NODE_POLICIES, role_with_policies
from infra.versions import EKS_ADDONS, SYSTEM_AMI_TYPE

SYSTEM_NODE_LABELS = {"fsdp-eks/node-group": "system"}
# Add-ons the nodes need before they can become Ready (pod networking, service routing, pod credentials); the
# others (CoreDNS, EBS CSI) run as Deployments and wait for the system nodes.
ADDONS_BEFORE_NODES = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")


@dataclass
class ClusterArgs:
    config: ClusterConfig
    cluster_name: str
    vpc_id: pulumi.Input[str]
    private_subnet_ids: pulumi.Input[list[str]]
    public_subnet_ids: pulumi.Input[list[str]]


class Cluster(pulumi.ComponentResource):
    """An EKS cluster in API authentication mode, with secrets encrypted by its own KMS key."""

    name: str
    kubeconfig: pulumi.Output[str]
    cluster_security_group_id: pulumi.Output[str]
    provider: k8s.Provider
    eks_cluster: eks.Cluster
    system_nodes: eks.ManagedNodeGroup
    partition: pulumi.Output[str]

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fsdp-eks:infra:Cluster", name, None, opts)
        cfg, child = args.config, pulumi.ResourceOptions(parent=self)
        self.name = args.cluster_name
        self._prefix = name
        self.partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition
        secrets_key = aws.kms.Key(
            f"{name}-secrets",
            description=f"Envelope encryption of Kubernetes secrets in {args.cluster_name}",
            enable_key_rotation=True,
            deletion_window_in_days=7,
            opts=child,
        )
        admin_policy = pulumi.Output.concat(
            "arn:", self.partition, ":eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
        )
        self.eks_cluster = eks.Cluster(
            name,
            name=args.cluster_name,
            version=cfg.kubernetes_version,
            vpc_id=args.vpc_id,
            private_subnet_ids=args.private_subnet_ids,
            public_subnet_ids=args.public_subnet_ids,
            # Nodes live in private subnets only; no public IPs on them.
            node_associate_public_ip_address=False,
            endpoint_private_access=True,
            endpoint_public_access=cfg.endpoint_public_access,
            public_access_cidrs=cfg.public_access_cidrs if cfg.endpoint_public_access else None,
            authentication_mode=eks.AuthenticationMode.API,
            access_entries={
                f"admin-{index}": eks.AccessEntryArgs(
                    principal_arn=arn,
                    access_policies={
                        "cluster-admin": eks.AccessPolicyAssociationArgs(
                            policy_arn=admin_policy, access_scope={"type": "cluster"}
                        )
                    },
                )
                for index, arn in enumerate(cfg.admin_role_arns)
            },
            create_oidc_provider=True,
            enabled_cluster_log_types=cfg.control_plane_logs,
            encryption_config_key_arn=secrets_key.arn,
            # The project manages every add-on below as an aws.eks.Addon, where tests and `pulumi preview` show it;
            # EKS must not bootstrap its own self-managed copies, and pulumi-eks must not install its own.
            skip_default_node_group=True,
            bootstrap_self_managed_addons=False,
            use_default_vpc_cni=True,
            coredns_addon_options={"enabled": False},
            kube_proxy_addon_options={"enabled": False},
            opts=child,
        )
        self.kubeconfig = pulumi.Output.secret(self.eks_cluster.kubeconfig_json)
        self.cluster_security_group_id = self.eks_cluster.cluster_security_group_id
        self.early_addons = [self._addon(addon, cfg) for addon in ADDONS_BEFORE_NODES]
        early_addons = self.early_addons
        self.node_role = role_with_policies(f"{name}-node", "ec2.amazonaws.com", NODE_POLICIES, self.partition, self)
        self.system_nodes = eks.ManagedNodeGroup(
            f"{name}-system",
            cluster=self.eks_cluster,
            node_group_name=f"{args.cluster_name}-system",
            node_role=self.node_role,
            subnet_ids=args.private_subnet_ids,
            instance_types=[cfg.system_node_instance_type],
            ami_type=SYSTEM_AMI_TYPE,
            scaling_config={
                "min_size": cfg.system_node_count,
                "desired_size": cfg.system_node_count,
                "max_size": cfg.system_node_count + 1,
            },
            labels=SYSTEM_NODE_LABELS,
            disk_size=100,
            opts=pulumi.ResourceOptions(parent=self, depends_on=early_addons),
        )
        self._addon("coredns", cfg, depends_on=[self.system_nodes])
        self._addon("aws-fsx-csi-driver", cfg, depends_on=[self.system_nodes, *early_addons])
        ebs_role = role_with_policies(
            f"{name}-ebs-csi",
            "pods.eks.amazonaws.com",
            ("service-role/AmazonEBSCSIDriverPolicy",),
            self.partition,
            self,
            tag_session=True,
        )
        self._addon(
            "aws-ebs-csi-driver",
            cfg,
            depends_on=[self.system_nodes, *early_addons],
            pod_identity_associations=[{"role_arn": ebs_role.arn, "service_account": "ebs-csi-controller-sa"}],
        )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.system_nodes]),
        )
        self.register_outputs({"name": self.name, "kubeconfig": self.kubeconfig})

    def _addon(
        self,
        addon: str,
        cfg: ClusterConfig,
        depends_on: list[pulumi.Resource] | None = None,
        **extra: object,
    ) -> aws.eks.Addon:
        pinned = EKS_ADDONS[addon]
        version = (
            pinned
            or aws.eks.get_addon_version_output(
                addon_name=addon,
                kubernetes_version=cfg.kubernetes_version,
                most_recent=False,
                opts=pulumi.InvokeOutputOptions(parent=self),
            ).version
        )
        return aws.eks.Addon(
            f"{self._prefix}-{addon}",
            cluster_name=self.name,
            addon_name=addon,
            addon_version=version,
            # Take over whatever EKS or an earlier install left, so the first `pulumi up` never conflicts.
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            # The name is a plain string, so the dependency on the control plane must be explicit.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.eks_cluster, *(depends_on or [])]),
            **extra,
        )


class ExistingCluster(pulumi.ComponentResource):
    """A cluster the stack does not manage: only a Kubernetes provider from the kubeconfig secret."""

    def __init__(
        self, name: str, cluster_name: str, kubeconfig: pulumi.Output[str], opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("fsdp-eks:infra:ExistingCluster", name, None, opts)
        self.name = cluster_name
        self.kubeconfig = kubeconfig
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=kubeconfig,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"name": cluster_name})
