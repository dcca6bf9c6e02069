"""Every IAM role of the stack gets the permissions boundary the deploy role demands.

The CI deploy role may create a role only with this boundary (ci/deploy_policy.py), so every role the program
creates must carry it, pulumi-eks's own roles included (the cluster's service role). A stack transform reaches them
all: the engine runs stack transforms on every registration through its resource monitor, the children a remote
component's provider registers included (pulumi/pulumi pkg/resource/deploy/source_eval.go, RegisterResource
collects `rm.stackTransforms` for each request).
"""

from __future__ import annotations

import pulumi

ROLE = "aws:iam/role:Role"


def role_with_boundary(args: pulumi.ResourceTransformArgs, boundary_arn: str) -> pulumi.ResourceTransformResult | None:
    """A role's properties (engine names, camelCase) with `permissionsBoundary` set; other resources unchanged."""
    if args.type_ != ROLE:
        return None
    return pulumi.ResourceTransformResult(props={**args.props, "permissionsBoundary": boundary_arn}, opts=args.opts)


def require_role_boundary(boundary_arn: str | None) -> None:
    """Register the stack transform when the stack names a boundary (cluster.rolePermissionsBoundary)."""
    if boundary_arn:
        pulumi.runtime.register_resource_transform(lambda args: role_with_boundary(args, boundary_arn))
