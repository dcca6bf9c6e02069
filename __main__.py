"""The fsdp-eks stack: config in; VPC, EKS, EFA GPU nodes, checkpoint storage, artifacts bucket, platform and training
job out.

Composition only: every resource lives in a component. `pulumi up` / `pulumi destroy`; see README.md.
"""

import pulumi

from infra.artifacts import ArtifactsBucket, ArtifactsBucketArgs, guard_created_bucket
from infra.autoscaler_access import AutoscalerAccess, AutoscalerAccessArgs
from infra.bad_node_cleanup import bad_node_cleanup
from infra.cluster import Cluster, ClusterArgs
from infra.existing_cluster import ExistingCluster
from infra.gpu_nodes import GpuNodeGroup, GpuNodeGroupArgs
from infra.iam import PodIdentity
from infra.iam_scope import IamScope, scope_iam_resources
from infra.lustre import CheckpointStorage, CheckpointStorageArgs
from infra.network import Network, NetworkArgs
from infra.prices import node_price
from stack.artifacts import CREATED_BUCKET_OUTPUT, REGION_OUTPUT, run_uri
from stack.endpoint_access import paths, route_of, unreachable_problem
from stack.fit import checkpoint_warning, sizing_summary
from stack.gpu_autoscaling import autoscaled
from stack.job_warnings import job_warnings
from stack.kubernetes_support import kubernetes_version_warning, today
from stack.pulumi_config import read_stack_config
from stack.run_cost import run_cost
from workloads.job.component import TrainingJob, TrainingJobArgs
from workloads.job.image import TrainerImage, TrainerImageArgs
from workloads.job.spec import job_spec
from workloads.platform.autoscaler import AUTOSCALER_NAMESPACE, AUTOSCALER_SERVICE_ACCOUNT
from workloads.platform.component import Platform, PlatformArgs
from workloads.platform.objects import artifacts_commands

config = read_stack_config()  # raises before any resource exists if the config is invalid
gpu_price = node_price(config.gpu_nodes, config.region)  # AWS's Price List API, or the catalog's figure, labelled
scope_iam_resources(IamScope(config.stack, config.cluster.role_permissions_boundary))  # before any role is registered
checkpoint_fs = None
node_groups: list[pulumi.Resource] = []
# What the platform and the job need while they exist (nodes, DNS, volume drivers, egress, the cluster itself):
# they depend on it, so `pulumi destroy` deletes the job, its volume and the platform before any of it.
runtime: list[pulumi.Resource] = []
autoscaling_group: pulumi.Output[str] | None = None
job_runtime: list[pulumi.Resource] = []

if config.cluster.existing:
    # `pulumi destroy` (with --run-program) takes the job's bad-node taints off the nodes (infra/bad_node_cleanup.py).
    cleanup = pulumi.ResourceHookBinding(before_delete=[bad_node_cleanup(config.cluster_name, config.region)])
    cluster = ExistingCluster("cluster", config.cluster_name, config.region, opts=pulumi.ResourceOptions(hooks=cleanup))
    runtime.append(cluster)
    pulumi.export("gpuNodeGroupName", None)
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
            config.cluster,
            config.cluster_name,
            config.region,
            network.vpc_id,
            network.private_subnet_ids,
            network.public_subnet_ids,
            with_fsx=bool(config.storage.fsx),  # never None here: parse_stack_config sets the cluster's default
            unreachable=unreachable_problem(config, route_of(config)),
            reachable=bool(paths(config)),
        ),
    )
    gpu_nodes = GpuNodeGroup(
        "gpu",
        GpuNodeGroupArgs(
            config=config.gpu_nodes,
            cluster=cluster.eks_cluster,
            cluster_name=config.cluster_name,
            vpc_id=network.vpc_id,
            subnet_id=network.gpu_subnet_id,
            cluster_security_group_id=cluster.cluster_security_group_id,
            node_role=cluster.node_role,
            depends_on=cluster.early_addons,
            price=gpu_price,
        ),
    )
    node_groups.append(gpu_nodes)
    runtime += [network, cluster, gpu_nodes]
    pulumi.export("gpuNodeGroupName", gpu_nodes.node_group_name)
    if autoscaled(config.gpu_nodes):  # idle nodes released, bad ones replaced (stack/gpu_autoscaling.py)
        autoscaling_group = gpu_nodes.autoscaling_group_name
        runtime.append(
            AutoscalerAccess(
                "autoscaler",
                AutoscalerAccessArgs(
                    PodIdentity(AUTOSCALER_NAMESPACE, AUTOSCALER_SERVICE_ACCOUNT),
                    config.cluster_name,
                    config.region,
                    config.stack,
                    autoscaling_group,
                    depends_on=[cluster],
                ),
            )
        )
    if config.storage.fsx:
        storage = CheckpointStorage(
            "checkpoints",
            CheckpointStorageArgs(
                config.storage,
                config.cluster_name,
                network.vpc_id,
                network.gpu_subnet_id,
                cluster.cluster_security_group_id,
            ),
        )
        checkpoint_fs = storage.file_system
        job_runtime.append(storage)

# The runs' durable artifacts: artifacts.bucket as it is, or a bucket of the stack's own that `pulumi destroy` keeps.
created_bucket: pulumi.Output[str] | None = None
if config.artifacts.bucket is None:
    guard_created_bucket(config.stack, config.region)  # preview refuses to replace the bucket an earlier up created
    artifacts = ArtifactsBucket("artifacts", ArtifactsBucketArgs(config.stack))
    created_bucket = artifacts.bucket_name
    job_runtime.append(artifacts)
artifacts_uri = pulumi.Output.from_input(created_bucket or config.artifacts.bucket or "").apply(
    lambda bucket: str(run_uri(bucket, config.artifacts.prefix, config.stack, config.job.run))
)

platform = Platform(
    "platform",
    PlatformArgs(provider=cluster.provider, config=config, depends_on=node_groups, autoscaling_group=autoscaling_group),
    opts=pulumi.ResourceOptions(depends_on=runtime),
)

if config.job.enabled:
    trainer_image = TrainerImage("trainer-image", TrainerImageArgs(stack=config.stack, image=config.job.image))
    job = TrainingJob(
        "job",
        TrainingJobArgs(
            spec=job_spec(config),
            provider=cluster.provider,
            cluster_name=config.cluster_name,
            image=trainer_image.image_ref,
            depends_on=[platform],
            checkpoint_file_system=checkpoint_fs,
            artifacts_bucket=created_bucket,
        ),
        opts=pulumi.ResourceOptions(depends_on=[platform, *job_runtime]),  # the platform brings `runtime` along
    )
    pulumi.export("trainerImage", trainer_image.image_ref)
    pulumi.export("jobName", job.job_name)
    pulumi.export("rendezvousId", job.rendezvous_id)

pulumi.export("clusterName", config.cluster_name)
pulumi.export(REGION_OUTPUT, config.region)
pulumi.export("totalGpus", config.total_gpus)
pulumi.export("estimatedCostPerHour", gpu_price.nodes_per_hour(config.gpu_nodes.count))
pulumi.export("gpuNodePrice", gpu_price.to_output())  # where the price comes from, and of when
pulumi.export("estimatedRunCost", run_cost(config, gpu_price))  # a run's phases at that price (stack/run_cost.py)
pulumi.export("jobSizing", sizing_summary(config))  # memory per GPU, fit and expected speed, from sizing.estimate
for warning in (checkpoint_warning(config), kubernetes_version_warning(config, today())):
    if warning:
        pulumi.log.warn(warning)
for warning in job_warnings(config.job) if config.job.enabled else []:
    pulumi.log.warn(warning)
pulumi.export("artifactsUri", artifacts_uri)
pulumi.export(CREATED_BUCKET_OUTPUT, created_bucket)  # the next preview reads it back (guard_created_bucket)
# Each S3 command its own Output: a first preview, before the bucket has its name, still shows the other commands.
s3_commands = {
    key: artifacts_uri.apply(lambda uri, key=key: artifacts_commands(uri)[key]) for key in artifacts_commands("")
}
pulumi.export("nextCommands", {**platform.next_commands, **s3_commands})
