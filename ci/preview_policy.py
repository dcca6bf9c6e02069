"""The preview role's permissions: what `pulumi preview` of this program calls in AWS, and nothing else.

A preview without --refresh reads no resource: the providers diff against the stack's state (pulumi-aws and
pulumi-kubernetes compute diffs locally; a create or update in preview is a dry run). What reaches AWS is the
program's data sources (invokes, which run during a preview) and the providers' own start-up. So, unlike
ReadOnlyAccess, the role cannot read S3 objects, SSM parameters, log events or secrets that a pull request's code
could print.

The Kubernetes side needs no IAM permission: the kubeconfig runs `aws eks get-token`, a presigned
sts:GetCallerIdentity, which needs none; what the role may see in the cluster is set by its EKS access entry
(docs/ci.md).
"""

from __future__ import annotations

from typing import Any

# Every data source the program calls during a preview, and the IAM actions it needs (a test fails when the program
# calls one missing here). pulumi-aws data sources, from their Terraform data sources' API calls.
INVOKE_ACTIONS: dict[str, tuple[str, ...]] = {
    "aws:index/getPartition:getPartition": (),  # answered from the provider's configuration
    # sts:GetCallerIdentity needs no permission (AWS STS API reference: "No permissions are required to perform
    # this operation").
    "aws:index/getCallerIdentity:getCallerIdentity": (),
    "aws:eks/getAddonVersion:getAddonVersion": ("eks:DescribeAddonVersions",),
    # An existing cluster's endpoint and CA certificate for the Kubernetes provider (infra/existing_cluster.py): public
    # facts of the cluster, no credential (terraform-provider-aws internal/service/eks/cluster_data_source.go: one
    # FindClusterByName, a DescribeCluster). The image push logs in on the runner: no ecr:GetAuthorizationToken.
    "aws:eks/getCluster:getCluster": ("eks:DescribeCluster",),
    # The GPU nodes' on-demand price (infra/prices.py): AWS's public price list, nothing of the account's.
    "aws:pricing/getProduct:getProduct": ("pricing:GetProducts",),
}
# Called by pulumi-eks's own code inside its components during a preview, which mocks cannot see
# (nodejs/eks/cluster/cluster.ts: aws.getRegion for the cluster's OIDC provider).
COMPONENT_ACTIONS: tuple[str, ...] = ("ec2:DescribeRegions",)
# The AWS provider also calls sts:GetCallerIdentity at start-up to learn the account, which needs no permission.


def preview_actions() -> list[str]:
    return sorted({a for actions in INVOKE_ACTIONS.values() for a in actions} | set(COMPONENT_ACTIONS))


def preview_policy() -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "WhatAPreviewCalls", "Effect": "Allow", "Action": preview_actions(), "Resource": "*"},
        ],
    }
