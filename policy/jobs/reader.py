"""The job API as the policy pack reads it: everything that differs between a PyTorchJob and a TrainJob's runtime,
behind one interface, as workloads/job/api.py puts their objects behind one (the pack cannot import workloads/: it
runs in its own environment, below it in the layers).

A check finds the reader of a resource by its type (registry.py reader_for) and asks it:
- the job's replica types, each with its pod template and pod count (`replicas`);
- where the fewest nodes the job runs on is written, and what they are (`nodes_path`, `fewest_nodes`);
- the check that its pods ask for what their node type has, and that check's policy (`node_type_violations`,
  `node_type_policy`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from policy.jobs.pods import Replica


@dataclass(frozen=True)
class PolicyInfo:
    """A policy of the pack: its name (what the pack's config and a preview's report call it) and description."""

    name: str
    description: str


class JobReader(ABC):
    """One job API's object that holds the worker pod. Implementations hold no state."""

    name: ClassVar[str]  # the job.api value (stack/job_api.py)
    resource_type: ClassVar[str]  # kubernetes:<apiVersion>:<kind> of the object that holds the worker pod
    nodes_path: ClassVar[tuple[str, ...]]  # where the object writes the fewest nodes the job runs on
    node_type_policy: ClassVar[PolicyInfo]

    @abstractmethod
    def replicas(self, props: Mapping[str, Any]) -> list[Replica]:
        """The job's replica types that run pods; one whose whole spec is unknown has an unknown pod template."""

    @abstractmethod
    def fewest_nodes(self, total: int, written: Any) -> int:
        """The fewest nodes the job runs on, from its `total` pods and the value at `nodes_path` (`written`)."""

    @abstractmethod
    def node_type_violations(self, resource_type: str, props: Mapping[str, Any]) -> list[str]:
        """Its pods are pinned to a catalog instance type and ask for all of its GPUs and EFA devices."""
