"""htop and nvtop on every GPU node, for a look at the node from inside the cluster:

    kubectl -n fsdp-system get pods -l app.kubernetes.io/name=node-tools -o wide    # one pod per GPU node
    kubectl -n fsdp-system exec -it POD -- nvtop                                     # or htop

The pod shares the node's PID namespace (htop shows the trainer's processes) and asks the NVIDIA container runtime
for every GPU's management library without claiming a GPU (NVIDIA_VISIBLE_DEVICES=all with the `utility`
capability), so the training job keeps all of them. The tools are installed from Ubuntu's archive when the pod
starts, which keeps the image an unmodified official one.
"""

from __future__ import annotations

from typing import Any

from stack.names import PART_OF, PLATFORM_NAMESPACE
from stack.versions import NODE_TOOLS_IMAGE
from workloads.platform.monitoring import GPU_NODES, GPU_TOLERATION

NODE_TOOLS = "node-tools"
INSTALL_AND_WAIT = (
    "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends htop nvtop"
    " && touch /tmp/ready && exec sleep infinity"
)


def node_tools_daemonset(namespace: str = PLATFORM_NAMESPACE) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": NODE_TOOLS, **PART_OF}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": NODE_TOOLS, "namespace": namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": NODE_TOOLS}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": GPU_NODES,
                    "tolerations": [GPU_TOLERATION],
                    "hostPID": True,
                    "automountServiceAccountToken": False,
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": NODE_TOOLS,
                            "image": NODE_TOOLS_IMAGE,
                            "command": ["/bin/sh", "-c", INSTALL_AND_WAIT],
                            "env": [
                                {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                                {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
                                {"name": "TERM", "value": "xterm-256color"},
                            ],
                            "readinessProbe": {"exec": {"command": ["test", "-f", "/tmp/ready"]}, "periodSeconds": 5},
                            "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "256Mi"}},
                        }
                    ],
                },
            },
        },
    }
