"""A model of what the Cluster Autoscaler and the scheduler do with the GPU node group, so that a drill can show a bad
node replaced and idle nodes released without a cluster. It is read from the autoscaler's source at the pinned version
(kubernetes/autoscaler, cluster-autoscaler-1.35.2; stack/versions.py). Modelled, not run: the rules below, one group.

- Placement (the scheduler): a pending pod goes on a ready node whose NoSchedule and NoExecute taints it tolerates
  (local/nodes.py, the TaintToleration filter) and whose free allocatable covers its requests.
- Scale up (core/scaleup): a pending pod that fits no node makes the autoscaler add a node to the group if the group's
  template node fits it, up to the group's max; with pods that each take a whole node, a node per such pod (the
  binpacking estimator). The template comes from the first of the group's nodes that is ready, schedulable and not
  being deleted (processors/nodeinfosprovider/mixed_nodeinfos_processor.go isNodeGoodTemplateCandidate), taints
  sanitized: the autoscaler's own, node-condition taints, and the --startup-taint and --status-taint keys
  (utils/taints/taints.go SanitizeTaints); with no node, from the group's own template (cloudprovider/aws/
  aws_manager.go buildNodeFromTemplate: the instance type's CPUs, memory and GPUs, the node group's node-template
  resource tags, its labels and taints from eks:DescribeNodegroup). A new node is taken as ready at once.
- Scale down (core/scaledown): a node whose GPU utilization, the GPUs requested by its non-DaemonSet pods over its
  allocatable ones (simulator/utilization/info.go; finished pods are not listed, utils/kubernetes/listers.go), is at
  or below --scale-down-gpu-utilization-threshold (0.5 by default) is unneeded; one unneeded for
  --scale-down-unneeded-time is removed while the group is above its min, and not within --scale-down-delay-after-add
  (10 minutes by default) of a scale-up. Its taints play no part (core/scaledown/eligibility/eligibility.go).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from local.nodes import untolerated

GPU = "nvidia.com/gpu"
GPU_UTILIZATION_THRESHOLD = 0.5  # --scale-down-gpu-utilization-threshold's default (config/const.go)
SCALE_DOWN_DELAY_AFTER_ADD_S = 10 * 60  # --scale-down-delay-after-add's default (config/flags/flags.go)
# The autoscaler's own taints, which a template never carries (utils/taints/taints.go).
AUTOSCALER_TAINTS = ("ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler")
_QUANTITY = re.compile(r"^(\d+)(m|Ki|Mi|Gi|Ti)?$")
_UNITS = {None: 1, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4}


def quantity(value: str | int, name: str = "") -> int:
    """A Kubernetes quantity in the forms the stack writes ("8", "10256Mi", "1900Gi", "500m") as an integer: bytes for
    binary suffixes, thousandths of a CPU for `name` "cpu"."""
    match = _QUANTITY.match(str(value))
    if match is None:
        raise ValueError(f"not a quantity this model reads: {value!r}")
    number, unit = int(match.group(1)), match.group(2)
    if name == "cpu":
        return number if unit == "m" else number * 1000
    return number * _UNITS[unit]


def resources(amounts: Mapping[str, str | int]) -> dict[str, int]:
    return {name: quantity(value, name) for name, value in amounts.items()}


@dataclass
class Node:
    name: str
    labels: dict[str, str]
    taints: list[dict[str, Any]]
    allocatable: dict[str, int]
    ready: bool = True
    unneeded_since: float | None = None


@dataclass
class Pod:
    name: str
    requests: dict[str, int]
    tolerations: tuple[Mapping[str, Any], ...]
    phase: str = "Pending"  # Pending, Running, Succeeded, Failed
    node: str | None = None
    daemonset: bool = False


@dataclass(frozen=True)
class Template:
    """What the autoscaler knows of a node of the group it has not seen."""

    labels: dict[str, str]
    taints: tuple[dict[str, Any], ...]
    allocatable: dict[str, int]


@dataclass(frozen=True)
class Autoscaling:
    min_size: int
    max_size: int
    unneeded_s: float
    status_taints: tuple[str, ...] = ()
    startup_taints: tuple[str, ...] = ()


@dataclass
class GpuGroup:
    """The GPU node group, its pods and the autoscaler's view of it, on a clock of seconds."""

    template: Template
    autoscaling: Autoscaling
    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    now: float = 0.0
    last_scale_up: float | None = None
    launched: int = 0
    events: list[str] = field(default_factory=list)

    def launch(self) -> Node:
        """A node of the group, as the template says it will be."""
        node = Node(f"gpu-{self.launched}", dict(self.template.labels), [dict(t) for t in self.template.taints],
                    dict(self.template.allocatable))  # fmt: skip
        self.launched += 1
        self.nodes.append(node)
        return node

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def live_pods(self, node: Node) -> list[Pod]:
        return [p for p in self.pods if p.node == node.name and p.phase in ("Pending", "Running")]

    def fits(self, pod: Pod, taints: Sequence[Mapping[str, Any]], free: Mapping[str, int]) -> bool:
        return not untolerated(taints, pod.tolerations) and all(
            free.get(name, 0) >= amount for name, amount in pod.requests.items()
        )

    def free(self, node: Node) -> dict[str, int]:
        free = dict(node.allocatable)
        for pod in self.live_pods(node):
            for name, amount in pod.requests.items():
                free[name] = free.get(name, 0) - amount
        return free

    def schedule(self) -> None:
        """Every pending pod onto the first node it fits."""
        for pod in (p for p in self.pods if p.phase == "Pending" and p.node is None):
            for node in self.nodes:
                if node.ready and self.fits(pod, node.taints, self.free(node)):
                    pod.node, pod.phase = node.name, "Running"
                    self.events.append(f"{pod.name} -> {node.name}")
                    break

    def template_node(self) -> Template:
        """The group's template as the autoscaler builds it: from its first good node, sanitized, else its own."""
        for node in self.nodes:
            marked = any(t["key"] in AUTOSCALER_TAINTS for t in node.taints)
            if node.ready and not marked:
                dropped = (
                    set(AUTOSCALER_TAINTS) | set(self.autoscaling.status_taints) | set(self.autoscaling.startup_taints)
                )
                kept = tuple(t for t in node.taints if t["key"] not in dropped)
                return Template(dict(node.labels), kept, dict(node.allocatable))
        return self.template

    def scale_up(self) -> None:
        template = self.template_node()
        pending = [p for p in self.pods if p.phase == "Pending" and p.node is None and not p.daemonset]
        for pod in pending:
            if len(self.nodes) >= self.autoscaling.max_size:
                self.events.append(f"{pod.name} stays Pending: the group is at its max {self.autoscaling.max_size}")
                return
            if not self.fits(pod, template.taints, template.allocatable):
                self.events.append(f"{pod.name} stays Pending: a new node would not fit it")
                continue
            node = self.launch()
            self.last_scale_up = self.now
            self.events.append(f"scale up: {node.name} for {pod.name}")
            self.schedule()

    def gpu_utilization(self, node: Node) -> float:
        requested = sum(p.requests.get(GPU, 0) for p in self.live_pods(node) if not p.daemonset)
        return requested / node.allocatable[GPU]

    def scale_down(self) -> None:
        for node in self.nodes:
            unneeded = self.gpu_utilization(node) <= GPU_UTILIZATION_THRESHOLD
            node.unneeded_since = (
                (node.unneeded_since if node.unneeded_since is not None else self.now) if unneeded else None
            )
        if self.last_scale_up is not None and self.now - self.last_scale_up < SCALE_DOWN_DELAY_AFTER_ADD_S:
            return
        for node in list(self.nodes):
            long_enough = (
                node.unneeded_since is not None and self.now - node.unneeded_since >= self.autoscaling.unneeded_s
            )
            if long_enough and len(self.nodes) > self.autoscaling.min_size:
                self.nodes.remove(node)
                self.events.append(f"scale down: {node.name}")

    def step(self, seconds: float) -> None:
        """The scheduler and one autoscaler loop, then the clock moves on."""
        self.schedule()
        self.scale_up()
        self.scale_down()
        self.now += seconds
