"""From the PyTorchJob manifest to the torchrun agents the local run starts: one per worker replica. Each has the
container's command and environment (local/launch.py) and the PET_* variables the Training Operator adds.

Pure functions of the manifest (no processes, no torch import). What changes for this machine beyond local/launch.py's
changes: the rendezvous points at the local etcd, with a rendezvous id fresh for each local run (a new run must never
join the closed rendezvous of the previous one in the same etcd).
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

from local.launch import (
    DEFAULT_WORKERS,
    LOOPBACK,
    AgentLaunch,
    LocalPlan,
    ManifestError,
    WorkerOptions,
    launcher_argv,
    local_container,
    local_node_name,
    local_trainer,
)
from local.pytorchjob.restart_policy import DEFAULT_POLICY, POLICIES, recreation_loops
from trainer.base.pod.bad_node import NODE_NAME_VARIABLE
from workloads.job.pytorchjob import CONTAINER_PERMANENT_EXITS

CONTAINER = "pytorch"  # the container the operator injects its PET_* variables into


def fresh_rendezvous_id(manifest_id: str) -> str:
    """The manifest's id plus a per-run suffix: the same etcd may hold the closed rendezvous of an earlier run."""
    return f"{manifest_id}-local-{time.strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(3)}"


def worker_container(manifest: dict[str, Any]) -> dict[str, Any]:
    try:
        template = manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
        containers = template["spec"]["containers"]
    except (KeyError, TypeError) as missing:
        raise ManifestError(f"not a PyTorchJob with a Worker replica spec: missing {missing}") from None
    for container in containers:
        if container.get("name") == CONTAINER:
            return dict(container)
    raise ManifestError(f"the Worker pod has no container named {CONTAINER!r}")


def operator_variables(manifest: dict[str, Any]) -> dict[str, str]:
    """The PET_* variables the Training Operator sets on an elastic PyTorchJob's container (torchrun reads
    PET_<FLAG> for each flag not given on its command line)."""
    spec = manifest["spec"]
    policy = spec.get("elasticPolicy") or {}
    replicas = spec["pytorchReplicaSpecs"]["Worker"]["replicas"]
    conf = ",".join(f"{item['key']}={item['value']}" for item in policy.get("rdzvConf", []))
    variables = {
        "PET_NPROC_PER_NODE": str(spec.get("nprocPerNode", "1")),
        "PET_NNODES": f"{policy.get('minReplicas', replicas)}:{policy.get('maxReplicas', replicas)}",
        "PET_RDZV_BACKEND": str(policy.get("rdzvBackend", "c10d")),
        "PET_RDZV_ENDPOINT": f"{policy.get('rdzvHost')}:{policy.get('rdzvPort')}",
        "PET_RDZV_ID": str(policy.get("rdzvId", manifest["metadata"]["name"])),
        "PET_MAX_RESTARTS": str(policy.get("maxRestarts", 0)),
    }
    if conf:
        variables["PET_RDZV_CONF"] = conf
    return variables


def flag_for(variable: str) -> str:
    return variable.removeprefix("PET_").lower().replace("_", "-")


def check_command_matches_policy(flags: dict[str, str], variables: dict[str, str]) -> None:
    """The command's explicit flags win over PET_* in torchrun; if they disagreed, the job on the cluster would
    not be the one its elasticPolicy describes. Refuse such a manifest rather than run either."""
    for variable, value in variables.items():
        flag = flag_for(variable)
        if flag in flags and flags[flag] != value:
            raise ManifestError(f"torchrun --{flag}={flags[flag]} disagrees with the operator's {variable}={value}")


def check_no_recreation_loop(manifest: dict[str, Any]) -> None:
    """Refuse a job that the operator would answer, for a failure no new pod cures, with pods created again without
    end (restart_policy.py recreation_loops): on the cluster it would hold every node and never fail."""
    loops = recreation_loops(manifest, CONTAINER_PERMANENT_EXITS)
    if loops:
        raise ManifestError("a permanent failure would never end the job: " + "; ".join(x.describe() for x in loops))


def local_plan(
    manifest: dict[str, Any],
    work_dir: Path,
    etcd_endpoint: str,
    metrics_port: int,
    stand_ins: dict[str, str] | None = None,
    workers: WorkerOptions = DEFAULT_WORKERS,
) -> LocalPlan:
    """The agents to start for `manifest`, with the rendezvous at `etcd_endpoint`, files under `work_dir`, the
    container variables `stand_ins` (the local S3 API's, local/artifacts.py) in place of the manifest's, and the
    `workers` each agent starts."""
    container = local_container(worker_container(manifest), work_dir, stand_ins or {})
    flags = container.flags
    variables = operator_variables(manifest)
    check_command_matches_policy(flags, variables)
    job = manifest["metadata"]["name"]
    replicas = int(manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"])
    rendezvous_id = fresh_rendezvous_id(variables["PET_RDZV_ID"])
    local = {
        "nproc-per-node": str(workers.nproc_per_node),
        "rdzv-backend": "etcd-v2",
        "rdzv-endpoint": etcd_endpoint,
        "rdzv-id": rendezvous_id,
        "local-addr": LOOPBACK,  # the address an agent advertises to the others, and the workers' MASTER_ADDR
    }
    changes = [
        f"torchrun --{name}={value} (manifest: {flags.get(name, 'unset')})"
        for name, value in local.items()
        if flags.get(name) != value
    ]
    variables = {**variables, **{f"PET_{name.upper().replace('-', '_')}": value for name, value in local.items()}}
    low, high = (int(n) for n in variables["PET_NNODES"].split(":"))
    trainer, args, trainer_changes = local_trainer(container, metrics_port, range(low, high + 1), workers)
    changes += trainer_changes
    argv = launcher_argv(container, {**flags, **local}, args)
    env = container.agent_environment(variables)
    agents = [
        AgentLaunch(
            name=f"{job}-worker-{index}",
            argv=list(argv),
            env={**env, NODE_NAME_VARIABLE: local_node_name(index)},
            trainer=trainer,
        )
        for index in range(replicas)
    ]
    backoff = int((manifest["spec"].get("runPolicy") or {}).get("backoffLimit", 0))
    policy = manifest["spec"]["pytorchReplicaSpecs"]["Worker"].get("restartPolicy", DEFAULT_POLICY)
    if policy not in POLICIES:
        raise ManifestError(f"the Worker replicas' restartPolicy {policy!r} is none of {', '.join(POLICIES)}")
    check_no_recreation_loop(manifest)
    nproc = int(manifest["spec"].get("nprocPerNode", 1))
    volumes = tuple(container.mounts.values())
    return LocalPlan(
        job, replicas, backoff, policy, rendezvous_id, nproc, agents, changes, volumes, workers.nproc_per_node
    )
