"""etcd for torchrun's rendezvous, as plain Kubernetes objects (a Deployment and a ClusterIP Service).

How it is used: every torchrun agent of the PyTorchJob joins the rendezvous at `etcd.fsdp-system:2379` through
torch's etcd-v2 backend, which speaks etcd's v2 HTTP API (hence etcd 3.5 with `--enable-v2`; 3.6 removed it).
The agents agree there on the set of nodes and their ranks, and re-form the group after a node is lost.

Why one member and an emptyDir are enough: the rendezvous keys are ephemeral. They matter only while agents are
forming or re-forming a group, expire with their TTLs, and each run uses a rendezvous id of its own (the job bumps
it per run), so nothing of lasting value is ever stored. A restart while a job runs costs it the steps since its
last checkpoint: every agent loses the store, stops its workers and exits with a retryable code, leaving the
rendezvous open (trainer/launch/launcher.py); the job's restartPolicy ExitCode creates the pods again, they rejoin in
the new etcd and the trainer resumes from the checkpoint.

Who may reach it: a NetworkPolicy admits only the stack's training pods, on the client port.
"""

from __future__ import annotations

from typing import Any

from stack.names import (
    COMPONENT_LABEL,
    ETCD_CLIENT_PORT,
    ETCD_SERVICE_HOST,
    ETCD_SERVICE_NAME,
    PART_OF,
    PLATFORM_NAMESPACE,
    STACK_LABEL,
    TRAINER_COMPONENT,
    TRAINING_NAMESPACE,
)
from stack.versions import ETCD_IMAGE
from workloads.platform.placement import SYSTEM_NODES

# etcd serves /health and Prometheus metrics on a separate, plain-HTTP listener; probes go there so that they keep
# working if client TLS is ever turned on.
ETCD_METRICS_PORT = 2381
ETCD_PEER_PORT = 2380
LABELS = {"app.kubernetes.io/name": "etcd", **PART_OF}
VOLUME_PATH = "/var/lib/etcd"
# The API server labels every namespace with its own name, unchangeably (Kubernetes docs, well-known labels), so a
# policy can select a namespace by name.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# A directory etcd creates itself inside the volume, so it gets the 0700 mode etcd insists on (the emptyDir's own
# mode, group-writable for fsGroup, would not do).
DATA_DIR = f"{VOLUME_PATH}/data"


def etcd_command() -> list[str]:
    """A single-member cluster: peers listen on loopback only, clients on the pod IP behind the Service."""
    peer = f"http://127.0.0.1:{ETCD_PEER_PORT}"
    return [
        "/usr/local/bin/etcd",
        f"--name={ETCD_SERVICE_NAME}",
        f"--data-dir={DATA_DIR}",
        f"--listen-client-urls=http://0.0.0.0:{ETCD_CLIENT_PORT}",
        f"--advertise-client-urls=http://{ETCD_SERVICE_HOST}:{ETCD_CLIENT_PORT}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster={ETCD_SERVICE_NAME}={peer}",
        "--initial-cluster-state=new",
        f"--listen-metrics-urls=http://0.0.0.0:{ETCD_METRICS_PORT}",
        # torch.distributed.elastic's etcd and etcd-v2 rendezvous backends use the v2 keys API.
        "--enable-v2=true",
        # Rendezvous keys are few and short-lived; compacting hourly keeps the v3 store small.
        "--auto-compaction-mode=periodic",
        "--auto-compaction-retention=1h",
    ]


def _probe(path: str, period: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": ETCD_METRICS_PORT},
        "periodSeconds": period,
        "timeoutSeconds": 5,
        "failureThreshold": failures,
    }


def etcd_deployment(namespace: str = PLATFORM_NAMESPACE, node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    """`node_selector`: workloads/platform/placement.py's; None for the stack's own system nodes."""
    selector = SYSTEM_NODES if node_selector is None else node_selector
    container = {
        "name": "etcd",
        "image": ETCD_IMAGE,
        "command": etcd_command(),
        # ETCDCTL_API=3 for `kubectl exec ... etcdctl` (the v3 API); the torch clients use v2 over HTTP.
        "env": [{"name": "ETCDCTL_API", "value": "3"}],
        "ports": [
            {"name": "client", "containerPort": ETCD_CLIENT_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": ETCD_METRICS_PORT, "protocol": "TCP"},
        ],
        "readinessProbe": _probe("/health", period=5, failures=3),
        # serializable=true answers from the local member without a quorum read: liveness only asks "is the
        # process serving", and a slow disk must not get it killed in a loop.
        "livenessProbe": _probe("/health?serializable=true", period=10, failures=6),
        "startupProbe": _probe("/health", period=2, failures=30),
        # A few hundred keys at most; these are generous for rendezvous and small beside an m6i node.
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "volumeMounts": [{"name": "data", "mountPath": VOLUME_PATH}],
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 65534,
            "runAsGroup": 65534,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": ETCD_SERVICE_NAME, "namespace": namespace, "labels": dict(LABELS)},
        "spec": {
            "replicas": 1,
            # Never two members on one (empty) data set: stop the old pod before starting the new one.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": dict(LABELS)},
            "template": {
                "metadata": {"labels": dict(LABELS)},
                "spec": {
                    **({"nodeSelector": dict(selector)} if selector else {}),
                    "enableServiceLinks": False,
                    "automountServiceAccountToken": False,
                    "securityContext": {"fsGroup": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    # Ephemeral by design (see the module docstring): the rendezvous state is not worth a volume.
                    "volumes": [{"name": "data", "emptyDir": {"sizeLimit": "1Gi"}}],
                },
            },
        },
    }


def etcd_service(namespace: str = PLATFORM_NAMESPACE) -> dict[str, Any]:
    """ClusterIP only: reachable from pods in the cluster, never from outside it."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": ETCD_SERVICE_NAME, "namespace": namespace, "labels": dict(LABELS)},
        "spec": {
            "type": "ClusterIP",
            "selector": dict(LABELS),
            "ports": [
                {"name": "client", "port": ETCD_CLIENT_PORT, "targetPort": "client", "protocol": "TCP"},
                {"name": "metrics", "port": ETCD_METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"},
            ],
        },
    }


def etcd_network_policy(stack: str, namespace: str = PLATFORM_NAMESPACE) -> dict[str, Any]:
    """Only the training pods of `stack` reach etcd, on the client port. Every other pod in the cluster, and any
    other port, is refused. The kubelet's probes come from the node, which NetworkPolicy does not restrict (the VPC
    CNI's policy agent always admits the node's own address). Enforced where the VPC CNI's network policy support
    is on; without it the object is accepted and has no effect."""
    trainers = {COMPONENT_LABEL: TRAINER_COMPONENT, STACK_LABEL: stack}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": ETCD_SERVICE_NAME, "namespace": namespace, "labels": dict(LABELS)},
        "spec": {
            "podSelector": {"matchLabels": dict(LABELS)},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    # One peer with both selectors: pods with these labels in that namespace (two peers would
                    # admit either).
                    "from": [
                        {
                            "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: TRAINING_NAMESPACE}},
                            "podSelector": {"matchLabels": trainers},
                        }
                    ],
                    "ports": [{"protocol": "TCP", "port": ETCD_CLIENT_PORT}],
                }
            ],
        },
    }


def etcd_objects(
    stack: str, namespace: str = PLATFORM_NAMESPACE, node_selector: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    return [etcd_deployment(namespace, node_selector), etcd_service(namespace), etcd_network_policy(stack, namespace)]
