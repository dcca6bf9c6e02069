"""AWS side of fsdp-eks: stack config, instance catalog, and the Pulumi components for network, cluster, GPU nodes."""
