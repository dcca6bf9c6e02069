"""TrainerAccess: what the job's pods may do in AWS, through one EKS Pod Identity role of their service account.

EKS allows one Pod Identity association per service account (EKS API reference, CreatePodIdentityAssociation:
ResourceInUseException when the namespace and service account already have one), so the token secret's read and the
S3 access are one role with a customer managed policy each: the token's secret (infra/hub_token_access.py), when
job.hfTokenSecret names one; the job's own run in the artifacts bucket (infra/s3_access.py artifacts_policy); and the
s3:// inputs elsewhere, read-only (read_only_policy). The role trusts EKS Pod Identity for the job's namespace,
service account and cluster alone (infra/iam.py pod_identity_trust_policy). No inline policy: the deploy role may not
write one (ci/deploy_policy.py); every policy and the role live under IAM_PATH with the stack's tag (infra/iam_scope.py
sets both on every registration).

Before the S3 access, this component was HubTokenAccess ("<job>-hub-token"): the alias keeps the URNs of its role and
association (their names derive from the component's, which the engine rewrites through the parent's alias: pulumi
sdk runtime/resource.py inherited_child_alias), so a stack deployed before it keeps both instead of replacing them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.hub_token_access import AccountFacts, secret_read_policy, stack_tags
from infra.iam import PodIdentity, cluster_arn, pod_identity_trust_policy
from infra.s3_access import artifacts_policy, inputs_outside, read_only_policy
from stack.names import IAM_PATH

TYPE = "fsdp-eks:infra:TrainerAccess"
FORMER_TYPE = "fsdp-eks:infra:HubTokenAccess"


def former_name(job_component: str) -> str:
    """The name HubTokenAccess had under the job component."""
    return f"{job_component}-hub-token"


@dataclass(frozen=True)
class TrainerAccessArgs:
    identity: PodIdentity  # the job's namespace and service account
    cluster_name: str
    region: str
    stack: str
    # The artifacts bucket's name: artifacts.bucket as given, or the stack's own bucket's (an Output).
    artifacts_bucket: pulumi.Input[str]
    # <prefix>/<stack>/run-<n>/ (stack/artifacts.py run_key): where the pods may write, and all they may list there.
    run_key: str
    # artifacts.bucket as given, None for the stack's own bucket: an input inside the run's key there needs no read
    # policy of its own.
    given_bucket: str | None = None
    # The s3:// inputs (job.dataset, job.validation.dataset, job.model, job.resumeFrom that are s3:// URIs): read-only.
    inputs: Sequence[str] = ()
    # job.hfTokenSecret: the token secret's name or ARN; None: the pods read no token.
    hub_token_secret: str | None = None
    # What the association needs first: the cluster, with its Pod Identity agent (the platform brings it along).
    depends_on: Sequence[pulumi.Resource] = ()


class TrainerAccess(pulumi.ComponentResource):
    """The pods' role, its policies and attachments, and the Pod Identity association of the job's service account."""

    role_arn: pulumi.Output[str]
    association: aws.eks.PodIdentityAssociation

    def __init__(self, name: str, args: TrainerAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        invoke = pulumi.InvokeOutputOptions(parent=self)
        partition = aws.get_partition_output(opts=invoke)
        account = aws.get_caller_identity_output(opts=invoke).account_id
        facts = pulumi.Output.all(partition.partition, partition.dns_suffix, account).apply(
            lambda v: AccountFacts(partition=v[0], dns_suffix=v[1], region=args.region, account=v[2])
        )
        tags = stack_tags(args.stack)
        trust = facts.apply(
            lambda f: pod_identity_trust_policy(
                args.identity, cluster_arn(f.partition, f.region, f.account, args.cluster_name)
            )
        )
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(f"{name}-role", path=IAM_PATH, assume_role_policy=trust, tags=tags, opts=child)
        documents: dict[str, tuple[str, pulumi.Input[str]]] = {
            "artifacts": (
                "Read and write the job's run in the artifacts bucket",
                pulumi.Output.all(partition.partition, args.artifacts_bucket).apply(
                    lambda v: artifacts_policy(v[0], v[1], args.run_key)
                ),
            )
        }
        outside = inputs_outside(args.inputs, args.given_bucket, args.run_key)
        if outside:
            documents["inputs"] = (
                "Read the training job's s3:// inputs",
                partition.partition.apply(lambda p: read_only_policy(p, outside)),
            )
        if args.hub_token_secret is not None:
            secret = args.hub_token_secret
            documents["hub-token"] = (
                "Read the Hugging Face token secret of the training job",
                facts.apply(lambda f: secret_read_policy(secret, f)),
            )
        attachments = []
        for suffix, (description, document) in documents.items():
            policy = aws.iam.Policy(
                f"{name}-{suffix}-policy",
                path=IAM_PATH,
                description=description,
                policy=document,
                tags=tags,
                opts=child,
            )
            attachments.append(
                aws.iam.RolePolicyAttachment(
                    f"{name}-{suffix}-attachment", role=role.name, policy_arn=policy.arn, opts=child
                )
            )
        # The pods use the role from their first start: the association exists, with every policy attached, before
        # the job (which depends on this component), and `pulumi destroy` removes it after the job.
        self.association = aws.eks.PodIdentityAssociation(
            f"{name}-association",
            cluster_name=args.cluster_name,
            namespace=args.identity.namespace,
            service_account=args.identity.service_account,
            role_arn=role.arn,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*attachments, *args.depends_on]),
        )
        self.role_arn = role.arn
        self.register_outputs({"roleArn": self.role_arn})


def trainer_access_options(job_component: str, parent: pulumi.Resource) -> pulumi.ResourceOptions:
    """The component's options under the job component `job_component`: its parent, and the alias to HubTokenAccess's
    former type and name there."""
    return pulumi.ResourceOptions(
        parent=parent, aliases=[pulumi.Alias(name=former_name(job_component), type_=FORMER_TYPE)]
    )
