"""A pod's container statuses after one of its containers exits, as the kubelet reports them under restartPolicy Never.
Init containers run one after another, each only once the one before exited 0, and the main containers start only after
the last; what never ran is still waiting (no exit code). Pure: the Training Operator's reading of a pod
(local/pytorchjob/restart_policy.py) and the Job controller's (local/trainjob/pod_failure_policy.py) both start from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainer.base.pod.exits import exit_for_signal

# A pod's restartPolicy (core/v1): what the kubelet does when one of its containers exits.
ALWAYS, ON_FAILURE, NEVER = "Always", "OnFailure", "Never"


def container_exit_code(returncode: int) -> int:
    """The exit code Kubernetes reports for a container process: 128 + N for one killed by signal N (Python's
    subprocess gives -N for that)."""
    return exit_for_signal(-returncode) if returncode < 0 else returncode


@dataclass(frozen=True)
class ContainerStatus:
    """One entry of a pod's initContainerStatuses or containerStatuses: `exit_code` is state.terminated.exitCode,
    None while the container waits (it never started) or runs."""

    name: str
    exit_code: int | None = None


def exited_container_statuses(
    pod_spec: Mapping[str, Any], container: str, code: int
) -> tuple[tuple[ContainerStatus, ...], tuple[ContainerStatus, ...]]:
    """(init container statuses, main container statuses) once `container` of a pod of template spec `pod_spec` (an
    init container or a main one) exited with `code`, every init container before it having exited 0."""
    init_names = [c["name"] for c in pod_spec.get("initContainers", [])]
    main_names = [c["name"] for c in pod_spec["containers"]]
    if container in init_names:
        at = init_names.index(container)
        inits = tuple(ContainerStatus(n, 0 if i < at else code if i == at else None) for i, n in enumerate(init_names))
        return inits, tuple(ContainerStatus(n) for n in main_names)
    if container in main_names:
        mains = tuple(ContainerStatus(n, code if n == container else None) for n in main_names)
        return tuple(ContainerStatus(n, 0) for n in init_names), mains
    raise ValueError(f"the pod has no container {container!r}: {', '.join(init_names + main_names)}")
