"""The EKS cluster: control plane with its log group and KMS key, a CPU system node group, EKS add-ons. A cluster the
stack does not manage is infra/existing_cluster.py's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s
from pulumi.output import contains_unknowns

from infra.addons import AddonTarget, cluster_addons, eks_addon
from infra.iam import NODE_POLICIES, PolicyRole, cluster_arn, key_policy, node_trust_policy, role_with_policies
from infra.launch_templates import METADATA_OPTIONS, instance_name_tags, root_volume
from stack.cluster_checks import (
    SYSTEM_NODE_GROUP_NAME,
    admin_access_entries,
    creator_problems,
    node_group_name_prefix,
)
from stack.config import ClusterConfig
from stack.endpoint_access import API_PORT, OWN_CIDR_FIX
from stack.fields import ConfigError
from stack.names import STACK_TAG_KEY
from stack.node_contract import SYSTEM_NODE_GROUP_LABEL
from stack.versions import SYSTEM_AMI_TYPE

SYSTEM_NODE_LABELS: dict[str, str] = dict([SYSTEM_NODE_GROUP_LABEL])
SYSTEM_ROOT_VOLUME_GIB = 100
# A KMS key scheduled for deletion can still be cancelled for this long (the maximum KMS allows): `pulumi destroy`
# of a cluster whose secrets it encrypted stays recoverable for a month.
KEY_DELETION_WINDOW_DAYS = 30


def control_plane_log_group_name(cluster_name: str) -> str:
    """The group EKS writes control-plane logs to (EKS user guide, "Send control plane logs to CloudWatch Logs")."""
    return f"/aws/eks/{cluster_name}/cluster"


def created_by_this_run(computed: pulumi.Output[Any]) -> pulumi.Output[bool]:
    """Whether this run creates (or replaces) the resource `computed` is an output of: during a preview, a computed
    output of a resource to be created is unknown, and of one that exists, known from the state. An apply with
    run_with_unknowns runs on an unknown value too, as UNKNOWN (pulumi sdk/python/lib/pulumi/output.py, apply); the
    result is known either way. In `pulumi up` itself every output is known: the answer is False there, and the
    preview that `up` shows first is where it is True."""
    return computed.apply(contains_unknowns, run_with_unknowns=True)


@dataclass
class ClusterArgs:
    config: ClusterConfig
    cluster_name: str
    region: str
    vpc_id: pulumi.Input[str]
    private_subnet_ids: pulumi.Input[list[str]]
    public_subnet_ids: pulumi.Input[list[str]]
    with_fsx: bool  # whether to install the FSx CSI driver (the stack has a file system)
    # Why the route that deploys the stack cannot reach a new cluster's API endpoint (stack/endpoint_access.py
    # unreachable_problem), or None: refused by the run that would create the cluster.
    unreachable: str | None = None
    reachable: bool = True  # whether any path reaches the endpoint from outside the VPC (else the private warning)


class Cluster(pulumi.ComponentResource):
    """An EKS cluster in API authentication mode, with secrets encrypted by its own KMS key."""

    name: str
    kubeconfig: pulumi.Output[str]
    cluster_security_group_id: pulumi.Output[str]
    provider: k8s.Provider
    eks_cluster: eks.Cluster
    system_nodes: eks.ManagedNodeGroup
    node_role: PolicyRole
    early_addons: list[aws.eks.Addon]

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fsdp-eks:infra:Cluster", name, None, opts)
        invoke = pulumi.InvokeOutputOptions(parent=self)
        self.name = args.cluster_name
        partition = aws.get_partition_output(opts=invoke).partition
        caller = aws.get_caller_identity_output(opts=invoke)
        secrets_key = self._secrets_key(name, args, partition, caller.account_id)
        self.eks_cluster = self._eks_cluster(name, args, partition, secrets_key, self._control_plane_logs(name, args))
        verdict = self._refuse_what_fails_the_first_up(args, caller.arn)
        # Not a secret: pulumi-eks's kubeconfig holds the endpoint, the CA and an `aws eks get-token` exec, no
        # credential (generateKubeconfig, nodejs/eks/cluster/cluster.ts); tests/test_state_secrets.py checks it.
        # Read through the verdict: the Kubernetes provider, and everything created through it, waits for it, so a
        # refusal fails the preview.
        self.kubeconfig = pulumi.Output.all(verdict, self.eks_cluster.kubeconfig_json).apply(lambda v: v[1])
        # The group EKS creates with the control plane: it admits all traffic between its members and from the
        # control plane, and is what a node must be in to join (EKS user guide, "View Amazon EKS security group
        # requirements for clusters").
        self.cluster_security_group_id = self.eks_cluster.eks_cluster.vpc_config.cluster_security_group_id
        self._private_access(name, args)
        self._addons_and_system_nodes(name, args, partition, caller.account_id)
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.system_nodes]),
        )
        self.register_outputs({"name": self.name, "kubeconfig": self.kubeconfig})

    def _secrets_key(
        self, name: str, args: ClusterArgs, partition: pulumi.Output[str], account: pulumi.Output[str]
    ) -> aws.kms.Key:
        """The cluster's own KMS key, which envelope-encrypts its Kubernetes secrets."""
        return aws.kms.Key(
            f"{name}-secrets",
            description=f"Envelope encryption of Kubernetes secrets in {args.cluster_name}",
            enable_key_rotation=True,
            deletion_window_in_days=KEY_DELETION_WINDOW_DAYS,
            policy=pulumi.Output.all(partition, account).apply(lambda v: key_policy(v[0], v[1])),
            # The deploy role may manage and grant only keys carrying the stack's tag (ci/deploy_policy.py); the
            # engine's stack name is the one the config was read for (stack/pulumi_config.py).
            tags={STACK_TAG_KEY: pulumi.get_stack()},
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _control_plane_logs(self, name: str, args: ClusterArgs) -> list[aws.cloudwatch.LogGroup]:
        """The stack owns the control-plane log group, with a retention; EKS would otherwise create it on first
        write, outside the stack and kept forever. It must exist before the cluster starts logging."""
        cfg = args.config
        if not cfg.control_plane_logs:
            return []
        return [
            aws.cloudwatch.LogGroup(
                f"{name}-control-plane-logs",
                name=control_plane_log_group_name(args.cluster_name),
                retention_in_days=cfg.control_plane_log_retention_days,
                opts=pulumi.ResourceOptions(parent=self),
            )
        ]

    def _eks_cluster(
        self,
        name: str,
        args: ClusterArgs,
        partition: pulumi.Output[str],
        secrets_key: aws.kms.Key,
        log_groups: list[aws.cloudwatch.LogGroup],
    ) -> eks.Cluster:
        """The control plane in API authentication mode, with the admins' access entries and no add-on of its own."""
        cfg = args.config
        admin_role_arns = self._admin_role_arns(cfg)
        admin_policy = pulumi.Output.concat(
            "arn:", partition, ":eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
        )
        return eks.Cluster(
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
                            policy_arn=admin_policy,
                            access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                        )
                    },
                )
                for index, arn in admin_role_arns.items()
            },
            # Pods get AWS credentials through EKS Pod Identity, which needs no OIDC provider.
            create_oidc_provider=False,
            enabled_cluster_log_types=cfg.control_plane_logs,
            encryption_config_key_arn=secrets_key.arn,
            # No security groups from pulumi-eks: its control-plane group would be what its
            # `clusterSecurityGroupId` reports, and nodes must be in the group EKS creates (read below).
            skip_default_security_groups=True,
            # The project manages every add-on below as an aws.eks.Addon, where tests and `pulumi preview` show it;
            # EKS must not bootstrap its own self-managed copies, and pulumi-eks must not install its own.
            skip_default_node_group=True,
            bootstrap_self_managed_addons=False,
            use_default_vpc_cni=True,
            coredns_addon_options={"enabled": False},
            kube_proxy_addon_options={"enabled": False},
            opts=pulumi.ResourceOptions(parent=self, depends_on=log_groups),
        )

    def _refuse_what_fails_the_first_up(self, args: ClusterArgs, caller_arn: pulumi.Output[str]) -> pulumi.Output[None]:
        """The run that creates the cluster (its preview above all) fails, before any resource exists, on what would
        otherwise fail that `pulumi up` after the VPC, the control plane and the GPU nodes: an endpoint the deploying
        route cannot reach (stack/endpoint_access.py), and an access entry EKS refuses (stack/cluster_checks.py
        creator_problems). Once the cluster exists, neither changes what the stack registers."""
        cfg = args.config
        if not args.reachable:
            pulumi.log.warn(
                f"the API endpoint of {args.cluster_name} is private: pulumi up, pulumi destroy and kubectl must run "
                "inside the VPC or a network routed to it (docs/aws.md, 'API endpoint access'). To reach it from this "
                f"machine only: {OWN_CIDR_FIX}",
                resource=self,
            )

        def judge(created: bool, caller: str) -> None:
            problems = [args.unreachable] if args.unreachable else []
            problems += creator_problems(cfg, args.cluster_name, caller)
            if created and problems:
                raise ConfigError(problems)

        return pulumi.Output.all(created_by_this_run(self.eks_cluster.eks_cluster.arn), caller_arn).apply(
            lambda v: judge(v[0], v[1])
        )

    def _private_access(self, name: str, args: ClusterArgs) -> None:
        """cluster.privateAccessCidrs reach the private endpoint on its port: the cluster security group guards the
        control plane's interfaces in the VPC and admits only its own members otherwise (EKS user guide, "Cluster API
        server endpoint": the group must allow 443 from a connected network)."""
        for index, cidr in enumerate(args.config.private_access_cidrs):
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-api-from-{index}",
                security_group_id=self.cluster_security_group_id,
                cidr_ipv4=cidr,
                ip_protocol="tcp",
                from_port=API_PORT,
                to_port=API_PORT,
                description="Kubernetes API from a network routed to the VPC (cluster.privateAccessCidrs)",
                opts=pulumi.ResourceOptions(parent=self),
            )

    def _addons_and_system_nodes(
        self, name: str, args: ClusterArgs, partition: pulumi.Output[str], account: pulumi.Output[str]
    ) -> None:
        """The add-ons a node needs to join (infra/addons.py before_nodes), the node role and the system nodes, then
        the add-ons that run on those nodes."""
        target = AddonTarget(
            name,
            args.cluster_name,
            args.config.kubernetes_version,
            pulumi.Output.all(partition, account).apply(
                lambda v: cluster_arn(v[0], args.region, v[1], args.cluster_name)
            ),
            partition,
            self,
        )
        addons = cluster_addons(args.with_fsx)
        self.early_addons = [eks_addon(a, target, [self.eks_cluster]) for a in addons if a.before_nodes]
        self.node_role = role_with_policies(f"{name}-node", node_trust_policy(), NODE_POLICIES, partition, self)
        self.system_nodes = self._system_nodes(name, args)
        self.late_addons = [
            eks_addon(a, target, [self.eks_cluster, self.system_nodes, *self.early_addons])
            for a in addons
            if not a.before_nodes
        ]

    def _admin_role_arns(self, cfg: ClusterConfig) -> dict[int, str]:
        """adminRoleArns but the creator's role, which EKS gives an entry itself (stack/cluster_checks.py
        admin_access_entries); the same whoever runs `pulumi`."""
        kept = admin_access_entries(cfg)
        for arn in sorted(set(cfg.admin_role_arns) - set(kept.values())):
            pulumi.log.info(
                f"{arn} is cluster.creatorRoleArn: EKS gives it cluster admin through the cluster creator's access "
                "entry, so cluster.adminRoleArns adds no second entry for it",
                resource=self,
            )
        return kept

    def _system_nodes(self, name: str, args: ClusterArgs) -> eks.ManagedNodeGroup:
        cfg = args.config
        template = aws.ec2.LaunchTemplate(
            f"{name}-system-template",
            description=f"{cfg.system_node_instance_type} system nodes of {args.cluster_name}",
            update_default_version=True,
            vpc_security_group_ids=[self.cluster_security_group_id],
            metadata_options=METADATA_OPTIONS,
            block_device_mappings=[root_volume(SYSTEM_ROOT_VOLUME_GIB)],
            tag_specifications=instance_name_tags(f"{args.cluster_name}-system"),
            opts=pulumi.ResourceOptions(parent=self),
        )
        return eks.ManagedNodeGroup(
            f"{name}-system",
            cluster=self.eks_cluster,
            # A prefix, not a fixed name: a change that replaces the group creates the new one beside the old.
            node_group_name_prefix=node_group_name_prefix(args.cluster_name, SYSTEM_NODE_GROUP_NAME),
            # pulumi-eks fills in the cluster's version only for a group without a launch template (nodejs/eks/nodes/
            # nodegroup.ts createManagedNodeGroup), and EKS keeps a group at the version it was created with: without
            # this, a kubernetesVersion bump would upgrade the control plane and leave the nodes behind. The control
            # plane's own version, read back, so the nodes follow it once it has been upgraded.
            version=self.eks_cluster.eks_cluster.version,
            node_role=self.node_role.role,
            subnet_ids=args.private_subnet_ids,
            instance_types=[cfg.system_node_instance_type],
            ami_type=SYSTEM_AMI_TYPE,
            scaling_config={
                "min_size": cfg.system_node_count,
                "desired_size": cfg.system_node_count,
                "max_size": cfg.system_node_count + 1,
            },
            launch_template={"id": template.id, "version": template.latest_version.apply(str)},
            labels=SYSTEM_NODE_LABELS,
            # The node role's policies are attached before the nodes start and detached after they are gone.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*self.early_addons, *self.node_role.attachments]),
        )
