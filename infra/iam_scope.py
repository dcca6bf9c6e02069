"""Every IAM role and customer managed policy of the stack lives under IAM_PATH, carries the stack's tag, and (roles)
the permissions boundary the deploy role demands.

The CI deploy role may create, change, attach and pass only roles and policies under IAM_PATH, may create a role only
with the boundary and its request tags conditioned on the stack's tag (ci/deploy_policy.py). So every role and policy
the program registers must carry them, pulumi-eks's own roles included (the cluster's service role, nodejs/eks/
servicerole.ts: an aws.iam.Role with description, assumeRolePolicy and the cluster's `tags`, which this program does
not set). A stack transform reaches them all: the engine runs stack transforms on every registration through its
resource monitor, the children a remote component's provider registers included (pulumi/pulumi
pkg/resource/deploy/source_eval.go, RegisterResource collects `rm.stackTransforms` for each request; Pulumi docs,
"transforms": "Transforms support modifying child resources of packaged components (such as those in awsx and eks)").

`path` forces a new role or policy in the AWS provider: the first `pulumi up` of a stack created before this rule
replaces its roles and policies, and with the cluster's and the nodes' roles the cluster and its node groups too (EKS
cannot change either afterwards: UpdateClusterConfig and UpdateNodegroupConfig take no role; EKS API reference). Such a
stack is rebuilt once, by an administrator rather than the CI deploy role, whose grants name only the new path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi

from stack.names import IAM_PATH, STACK_TAG_KEY

ROLE = "aws:iam/role:Role"
POLICY = "aws:iam/policy:Policy"


@dataclass(frozen=True)
class IamScope:
    """What every role and policy of one stack carries."""

    stack: str
    boundary_arn: str | None = None  # cluster.rolePermissionsBoundary; None: roles get no boundary


def stack_tags(own: Any, stack: str) -> dict[str, Any]:
    """A resource's own tags with the stack's tag added (the stack's value wins). A resource whose tags are not yet
    known cannot be merged with, and would reach the deploy role without the tag its grants require: refused here,
    before anything is created."""
    if own is None:
        return {STACK_TAG_KEY: stack}
    if not isinstance(own, Mapping):
        raise ValueError(f"tags {own!r} are not a known mapping; the stack's tag {STACK_TAG_KEY} cannot be added")
    return {**own, STACK_TAG_KEY: stack}


def scoped_props(type_: str, props: Mapping[str, Any], scope: IamScope) -> dict[str, Any] | None:
    """A role's or customer managed policy's properties (engine names, camelCase) with `path`, the stack's tag and,
    for a role, `permissionsBoundary` set; None for every other resource."""
    if type_ not in (ROLE, POLICY):
        return None
    scoped = {**props, "path": IAM_PATH, "tags": stack_tags(props.get("tags"), scope.stack)}
    if type_ == ROLE and scope.boundary_arn:
        scoped["permissionsBoundary"] = scope.boundary_arn
    return scoped


def scoped_iam(args: pulumi.ResourceTransformArgs, scope: IamScope) -> pulumi.ResourceTransformResult | None:
    """The stack transform: `scoped_props` applied to one registration."""
    props = scoped_props(args.type_, args.props, scope)
    return None if props is None else pulumi.ResourceTransformResult(props=props, opts=args.opts)


def scope_iam_resources(scope: IamScope) -> None:
    """Register the stack transform; before any role or policy is registered."""
    pulumi.runtime.register_resource_transform(lambda args: scoped_iam(args, scope))
