"""The fsdp-eks stack: config in; VPC, EKS, EFA GPU nodes, platform and training job out.

Composition only: every resource lives in a component. `pulumi up` / `pulumi destroy`; see README.md.
"""

import pulumi

from infra.cluster import Cluster, ClusterArgs, ExistingCluster
from infra.gpu_nodes import GpuNodeGroup, GpuNodeGroupArgs
from infra.network import Network, NetworkArgs
from infra.pulumi_config import read_stack_config

config = read_stack_config()  # raises before any resource exists if the config is invalid
secrets = pulumi.Config("fsdp-eks")

if config.cluster.existing:
    cluster = ExistingCluster("cluster", config.cluster_name, secrets.require_secret("kubeconfig"))
    gpu_node_group_name = None
else:
    network = Network(
        "network",
        NetworkArgs(
            config.network, config.availability_zones, config.gpu_availability_zone, config.cluster_name, config.region
        ),
    )
    cluster = Cluster(
        "cluster",
        ClusterArgs(
            config.cluster, config.cluster_name, network.vpc_id, network.private_subnet_ids, network.public_subnet_ids
        ),
    )
    gpu_nodes = GpuNodeGroup(
        "gpu",
        GpuNodeGroupArgs(
            config=config.gpu_nodes,
            cluster=cluster.eks_cluster,
            cluster_name=config.cluster_name,
            availability_zone=config.gpu_availability_zone,
            vpc_id=network.vpc_id,
            subnet_id=network.gpu_subnet_id,
            cluster_security_group_id=cluster.cluster_security_group_id,
            node_role=cluster.node_role,
            depends_on=cluster.early_addons,
        ),
    )
    gpu_node_group_name = gpu_nodes.node_group_name

pulumi.export("clusterName", config.cluster_name)
pulumi.export("region", config.region)
pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("gpuNodeGroupName", gpu_node_group_name)
pulumi.export("totalGpus", config.total_gpus)
pulumi.export("estimatedCostPerHour", config.cost_per_hour)
