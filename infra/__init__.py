"""AWS side of fsdp-eks: the Pulumi components for the network, the cluster, the GPU nodes and the checkpoint storage,
and the IAM documents they attach (the stack's config and the instance catalog live in stack/ and sizing/)."""
