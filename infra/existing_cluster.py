"""An EKS cluster the stack does not manage, reached from its name and the AWS identity of whoever runs Pulumi.

The stack reads the cluster's endpoint and certificate authority with the aws.eks.getCluster data source
(eks:DescribeCluster) and gives its Kubernetes provider a kubeconfig whose user runs `aws eks get-token`: a token
made on the spot from the caller's AWS credentials (a presigned sts:GetCallerIdentity, aws/aws-cli
awscli/customizations/eks/get_token.py), valid for minutes. The kubeconfig, which the provider's inputs keep in the
stack's state, therefore holds no credential: the endpoint and the CA certificate are public facts of the cluster,
and what the caller may do there is set by its EKS access entry.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

# The ExecCredential version the kubeconfig asks for. `aws eks get-token` answers in the version client-go names in
# KUBERNETES_EXEC_INFO, and in v1beta1 when none is named (get_token.py discover_api_version); every supported
# client-go sets it (kubernetes/kubernetes#95489).
EXEC_API_VERSION = "client.authentication.k8s.io/v1beta1"
KUBECONFIG_NAME = "aws"  # the context and user name; pulumi-eks uses the same (nodejs/eks/cluster/cluster.ts)


def token_command(cluster_name: str, region: str) -> list[str]:
    """`aws eks get-token` for the cluster, as the exec plugin's command and arguments. `--output json`: the caller's
    AWS CLI may default to text, table or YAML, which client-go cannot read (pulumi-eks passes it for the same
    reason, generateKubeconfig in nodejs/eks/cluster/cluster.ts)."""
    return ["aws", "eks", "get-token", "--cluster-name", cluster_name, "--region", region, "--output", "json"]


def exec_kubeconfig(cluster_name: str, region: str, endpoint: str, certificate_authority: str) -> dict[str, Any]:
    """A kubeconfig for the cluster at `endpoint` (its base64 CA certificate `certificate_authority`) whose one user
    runs `aws eks get-token`: the shape pulumi-eks generates for the clusters it creates (generateKubeconfig), with
    the cluster named after itself rather than "kubernetes"."""
    command, *args = token_command(cluster_name, region)
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": cluster_name, "cluster": {"server": endpoint, "certificate-authority-data": certificate_authority}}
        ],
        "contexts": [{"name": KUBECONFIG_NAME, "context": {"cluster": cluster_name, "user": KUBECONFIG_NAME}}],
        "current-context": KUBECONFIG_NAME,
        "users": [
            {
                "name": KUBECONFIG_NAME,
                "user": {"exec": {"apiVersion": EXEC_API_VERSION, "command": command, "args": args}},
            }
        ],
    }


class ExistingCluster(pulumi.ComponentResource):
    """A cluster the stack does not manage: a Kubernetes provider for it, from its name and region alone."""

    name: str
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider

    def __init__(self, name: str, cluster_name: str, region: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fsdp-eks:infra:ExistingCluster", name, None, opts)
        self.name = cluster_name
        cluster = aws.eks.get_cluster_output(
            name=cluster_name, region=region, opts=pulumi.InvokeOutputOptions(parent=self)
        )
        # The result's blocks are dict subclasses, and come back as plain dicts where the SDK does not rebuild the
        # nested types: read the CA's "data" by key.
        self.kubeconfig = pulumi.Output.all(cluster.endpoint, cluster.certificate_authorities).apply(
            lambda v: json.dumps(exec_kubeconfig(cluster_name, region, v[0], v[1][0]["data"]))
        )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"name": cluster_name})
