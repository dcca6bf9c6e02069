"""The local run's nodes, their taints, and the one scheduling rule the run needs: a pod goes only onto a node whose
NoSchedule and NoExecute taints it tolerates. There is one node per worker pod, as the cluster runs one pod per GPU
node, named as the downward API names them to the pod (local/launch.py local_node_name). The rule is the scheduler's
TaintToleration filter plugin (kubernetes pkg/scheduler/framework/plugins/tainttoleration; the matching rule is
k8s.io/api core/v1 toleration.go, Toleration.ToleratesTaint).

The cluster may have a spare node for a pod created again; the local run has none: a pod whose own node is tainted
stays Pending, as a pod with no other node would, until the taint is removed or a node added. A job that then has
fewer running pods than its elastic minimum cannot go on: the local run ends it with what the cluster needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainer.base.pod.bad_node import NODE_NAME_VARIABLE

# The effects the scheduler filters on; PreferNoSchedule only scores (TaintToleration.Filter).
FILTERED_EFFECTS = ("NoSchedule", "NoExecute")


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Toleration.ToleratesTaint: the effect empty or equal, the key empty (with Exists: every key) or equal, then
    Exists matches any value and Equal (the default operator) the same value."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and toleration.get("value", "") == taint.get("value", "")


def untolerated(taints: Sequence[Mapping[str, Any]], tolerations: Sequence[Mapping[str, Any]]) -> list[Mapping]:
    """The taints that keep a pod with `tolerations` off a node (filtered effects only)."""
    return [
        taint
        for taint in taints
        if taint.get("effect") in FILTERED_EFFECTS and not any(tolerates(t, taint) for t in tolerations)
    ]


def shown(taint: Mapping[str, Any]) -> str:
    """A taint as `kubectl taint` writes it: key=value:Effect."""
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint['key']}{value}:{taint['effect']}"


@dataclass
class LocalNodes:
    """The nodes of one local run: their taints, the pods' tolerations (the worker template's), and the job's
    elastic minimum."""

    tolerations: tuple[Mapping[str, Any], ...]
    min_pods: int
    taints: dict[str, list[Mapping[str, Any]]] = field(default_factory=dict)

    def taint(self, node: str, taint: Mapping[str, Any]) -> None:
        """What `kubectl taint` (or the launcher, trainer/launch/node_taint.py) does to the node."""
        kept = [t for t in self.taints.get(node, []) if (t["key"], t["effect"]) != (taint["key"], taint["effect"])]
        self.taints[node] = [*kept, dict(taint)]

    def unschedulable(self, env: Mapping[str, str]) -> str:
        """Why the pod whose environment is `env` (its node in NODE_NAME) cannot be scheduled again; "" if it can."""
        node = env.get(NODE_NAME_VARIABLE, "")
        refused = untolerated(self.taints.get(node, []), self.tolerations)
        if not refused:
            return ""
        taints = ", ".join(shown(taint) for taint in refused)
        return f"0/1 nodes are available: {node} has untolerated taint {taints}, and no other node is free"

    def short_of(self, running: int) -> str:
        """Why the job cannot go on with `running` pods; "" when its elastic minimum allows it."""
        if running >= self.min_pods:
            return ""
        return (
            f"the job needs at least {self.min_pods} node(s) and {running} can run it: a node is needed (on the "
            "cluster, the other pods wait in the rendezvous until its join timeout; node auto repair, a replacement "
            "or a removed taint brings the node back: docs/aws.md, 'Bad nodes')"
        )
