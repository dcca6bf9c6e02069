"""Where the platform's own pods (etcd, the operators, Prometheus, Grafana, kube-state-metrics) run.

On the cluster the stack creates they select its system nodes by the label infra/cluster.py gives them. An existing
cluster is asked for no such label (docs/aws.md, "An existing cluster", lists what it must provide): there they
select nothing and go to any node they tolerate, which keeps them off the GPU nodes, tainted by the node contract.
"""

from __future__ import annotations

from stack.config import StackConfig
from stack.names import NODE_GROUP_LABEL, SYSTEM_NODE_GROUP

SYSTEM_NODES = {NODE_GROUP_LABEL: SYSTEM_NODE_GROUP}


def platform_node_selector(config: StackConfig) -> dict[str, str]:
    return {} if config.cluster.existing else dict(SYSTEM_NODES)
