"""TrainingJob: the job API's objects, the service account the job's pods run as, and that account's Pod Identity
role. The objects are the PyTorchJob or, with job.api trainjob, the ClusterTrainingRuntime and TrainJob. The role
(infra/trainer_access.py) reaches the stack's runs in the artifacts bucket, the s3:// inputs read-only and, when the
stack names the Hugging Face token's secret, its read. No resource holds the token.

`pulumi up` starts the run; any change to the job (config, image, run counter) replaces the job, deleting the old
one first (it has a fixed name); `pulumi destroy` removes it. The objects are the job API's dicts
(workloads/job/api.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from infra.iam import PodIdentity
from infra.trainer_access import TrainerAccess, TrainerAccessArgs, trainer_access_options
from stack.file_system import LustreFileSystem
from workloads.job.api import job_api_for
from workloads.job.checkpoint_volume import checkpoint_volume_objects
from workloads.job.node_access import (
    node_admission_policy,
    node_admission_policy_binding,
    node_cluster_role,
    node_cluster_role_binding,
)
from workloads.job.pod import namespace_manifest, service_account_manifest
from workloads.job.spec import DEFAULT_CHECKPOINT_CLAIM, JobSpec


@dataclass(frozen=True)
class TrainingJobArgs:
    # The job as far as it is known before anything is built (job_spec without an image): job.image, or the
    # repository and content tag of the image TrainerImage builds (the same tag, so the same rendezvous id).
    spec: JobSpec
    provider: k8s.Provider
    # The EKS cluster the pods run in: the Pod Identity association of their service account names it.
    cluster_name: str
    # The image the pods run: TrainerImage.image_ref (the pushed repository:tag@digest, or job.image as given).
    # None: the image the spec names (for tests).
    image: pulumi.Input[str] | None = None
    # Whatever the job needs running first: the platform (etcd, training operator, device plugins).
    depends_on: Sequence[pulumi.Resource] = ()
    # The stack's FSx for Lustre file system (CheckpointStorage.file_system), for the default checkpoint claim.
    checkpoint_file_system: LustreFileSystem[pulumi.Input[str]] | None = None
    # The artifacts bucket's name when the stack creates it (ArtifactsBucket.bucket_name, known once created); None:
    # artifacts.bucket, which the spec names (JobSpec.artifacts.bucket).
    artifacts_bucket: pulumi.Input[str] | None = None


class TrainingJob(pulumi.ComponentResource):
    """The training run: namespace, service account (with its Pod Identity role), checkpoint claim (on FSx when
    given) and the job."""

    job_name: str
    namespace: str
    rendezvous_id: str

    def __init__(self, name: str, args: TrainingJobArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fsdp-eks:workloads:TrainingJob", name, None, opts)
        static = args.spec
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace", metadata=namespace_manifest(static)["metadata"], opts=child
        )
        account = service_account_manifest(static)
        service_account = k8s.core.v1.ServiceAccount(
            f"{name}-service-account",
            metadata=account["metadata"],
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[namespace])),
        )
        prerequisites: list[pulumi.Resource] = [namespace, service_account, *args.depends_on]
        prerequisites += self._node_access(name, static, child, service_account)
        prerequisites.append(self._trainer_access(name, static, args))
        prerequisites += self._checkpoint_claim(name, static, args, child)

        # The job API's custom resources in order (workloads/job/api.py): the PyTorchJob, or a TrainJob's runtime and
        # the TrainJob. Only the image field waits for the push, and the artifacts bucket's variable for a bucket the
        # stack creates; the rest of the job (rendezvous id included, derived from the image's content tag; every
        # trainer flag, --artifacts-uri naming the bucket through that variable) is known at preview time and matches
        # what the render CLI prints.
        self.job = self._custom_resources(name, static, args, child, prerequisites)
        self.job_name = static.name
        self.namespace = static.namespace
        self.rendezvous_id = static.rendezvous_id
        self.register_outputs(
            {"jobName": self.job_name, "namespace": self.namespace, "rendezvousId": self.rendezvous_id}
        )

    def _custom_resources(
        self,
        name: str,
        spec: JobSpec,
        args: TrainingJobArgs,
        opts: pulumi.ResourceOptions,
        prerequisites: list[pulumi.Resource],
    ) -> k8s.apiextensions.CustomResource:
        """Each resource after those before it and after the prerequisites it names (a cluster-scoped runtime after
        the platform alone); all replaced on any change (a TrainJob's runtime's JobSet failure policy is immutable,
        its trainer too). Returns the last: the job itself."""
        created: list[k8s.apiextensions.CustomResource] = []
        for resource in job_api_for(spec.api).custom_resources(spec, args.image, args.artifacts_bucket):
            after = prerequisites if resource.after_prerequisites else list(args.depends_on)
            created.append(
                k8s.apiextensions.CustomResource(
                    f"{name}-{resource.suffix}",
                    api_version=resource.object["apiVersion"],
                    kind=resource.object["kind"],
                    metadata=resource.object["metadata"],
                    spec=resource.object["spec"],
                    opts=pulumi.ResourceOptions.merge(opts, _replaced([*after, *created])),
                )
            )
        return created[-1]

    @staticmethod
    def _node_access(
        name: str, spec: JobSpec, opts: pulumi.ResourceOptions, service_account: k8s.core.v1.ServiceAccount
    ) -> list[pulumi.Resource]:
        """The service account's get and patch on nodes (workloads/job/node_access.py), bound before any pod starts:
        a launcher that exits EXIT_BAD_NODE taints its node with it. The admission policy that narrows the patch to
        that taint on the caller's own node is bound first, so the grant is never in force without it."""
        policy_object, policy_binding_object = node_admission_policy(spec), node_admission_policy_binding(spec)
        policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{name}-node-policy", metadata=policy_object["metadata"], spec=policy_object["spec"], opts=opts
        )
        policy_binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{name}-node-policy",
            metadata=policy_binding_object["metadata"],
            spec=policy_binding_object["spec"],
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[policy])),
        )
        role_object, binding_object = node_cluster_role(spec), node_cluster_role_binding(spec)
        role = k8s.rbac.v1.ClusterRole(
            f"{name}-node-access", metadata=role_object["metadata"], rules=role_object["rules"], opts=opts
        )
        binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-node-access",
            metadata=binding_object["metadata"],
            role_ref=binding_object["roleRef"],
            subjects=binding_object["subjects"],
            opts=pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(depends_on=[role, service_account, policy_binding])
            ),
        )
        return [policy_binding, binding]

    def _trainer_access(self, name: str, spec: JobSpec, args: TrainingJobArgs) -> TrainerAccess:
        """The service account's Pod Identity role: the stack's runs in the artifacts bucket, the s3:// inputs
        read-only, the token's secret when one is named."""
        bucket = spec.artifacts.bucket if args.artifacts_bucket is None else args.artifacts_bucket
        if bucket is None:
            raise ValueError(f"job {spec.name}: no artifacts bucket: neither artifacts.bucket nor the stack's own")
        return TrainerAccess(
            f"{name}-trainer-access",
            TrainerAccessArgs(
                identity=PodIdentity(spec.namespace, spec.service_account),
                cluster_name=args.cluster_name,
                region=spec.artifacts.region,
                stack=spec.stack,
                artifacts_bucket=bucket,
                run_key=spec.artifacts.run_key,
                given_bucket=spec.artifacts.bucket,
                inputs=spec.artifacts.inputs,
                hub_token_secret=spec.hub_token.secret if spec.hub_token is not None else None,
                depends_on=list(args.depends_on),
            ),
            opts=trainer_access_options(name, self),
        )

    def _checkpoint_claim(
        self, name: str, spec: JobSpec, args: TrainingJobArgs, opts: pulumi.ResourceOptions
    ) -> list[pulumi.Resource]:
        if not spec.checkpoint.on_stack_file_system:
            return []  # an emptyDir, or the user's own claim
        fs = args.checkpoint_file_system
        if fs is None:
            pulumi.log.warn(
                f"job {spec.name}: {spec.nodes} nodes need shared checkpoint storage, and neither job.checkpointClaim "
                f"nor an FSx file system is given; the pods stay Pending until a ReadWriteMany claim named "
                f"{DEFAULT_CHECKPOINT_CLAIM} exists in namespace {spec.namespace} (see docs/job.md)",
                resource=self,
            )
            return []
        objects = pulumi.Output.all(fs.file_system_id, fs.dns_name, fs.mount_name).apply(
            lambda v: checkpoint_volume_objects(spec, LustreFileSystem(v[0], v[1], v[2], fs.capacity_gib))
        )
        volume = k8s.core.v1.PersistentVolume(
            f"{name}-checkpoints",
            metadata=objects.apply(lambda o: o[0]["metadata"]),
            spec=objects.apply(lambda o: o[0]["spec"]),
            opts=opts,
        )
        claim = k8s.core.v1.PersistentVolumeClaim(
            f"{name}-checkpoints",
            metadata=objects.apply(lambda o: o[1]["metadata"]),
            spec=objects.apply(lambda o: o[1]["spec"]),
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[volume])),
        )
        return [claim]


def _replaced(depends_on: list[pulumi.Resource]) -> pulumi.ResourceOptions:
    # A running job cannot be patched into a different one: replace it, deleting first because the name is fixed
    # (and two runs must not share the GPU nodes).
    return pulumi.ResourceOptions(depends_on=depends_on, replace_on_changes=["*"], delete_before_replace=True)
