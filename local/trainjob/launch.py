"""From a TrainJob and its ClusterTrainingRuntime to the torchrun agents the local run starts: one per node. Each runs
the runtime's "node" container as Trainer v2 completes it (the TrainJob's image, command and env), with the PET_*
variables Trainer v2's torch plugin adds.

Pure functions of the two objects (no processes, no torch import), built from the PyTorchJob runner's own pieces
(local/launch.py). What Trainer v2 sets, from kubeflow/trainer v2.3.0 pkg/runtime/framework/plugins/torch/torch.go:
PET_NNODES (trainer.numNodes), PET_NPROC_PER_NODE (trainer.numProcPerNode), PET_NODE_RANK (the pod's completion
index), PET_MASTER_ADDR (node 0: "<job>-node-0-0.<job>") and PET_MASTER_PORT (29500). What changes for this machine,
and only that: one worker process per agent (or --nproc-per-node), the master on loopback at a free port (node 0's pod
has its own address on the cluster; here every "pod" shares one), and the trainer's local changes (CPU, paths under
the run's directory).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from local.launch import (
    DEFAULT_WORKERS,
    LOCAL_NPROC_PER_NODE,
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
from local.pod_status import NEVER
from trainer.base.pod.bad_node import NODE_NAME_VARIABLE
from trainer.base.pod.gang_restarts import RESTART_ATTEMPT_VARIABLE

NODE = "node"  # the replicated job and the container Trainer v2 completes (pkg/constants/constants.go Node)
TRAINER_V2_PORT = 29500  # PET_MASTER_PORT on the cluster (constants.go ContainerTrainerPort)
# torchrun flags the torch plugin sets through PET_*; a command that gave them would override the TrainJob's numbers.
TRAINER_V2_FLAGS = ("nnodes", "nproc-per-node", "node-rank", "master-addr", "master-port")


def node_container(runtime: dict[str, Any], trainjob: dict[str, Any]) -> dict[str, Any]:
    """The runtime's node container with the TrainJob's image and command, and its env merged by name over the
    runtime's (the TrainJob's wins), as Trainer v2 builds it (pkg/runtime/framework/plugins/jobset/builder.go)."""
    try:
        (replicated,) = [j for j in runtime["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == NODE]
        containers = replicated["template"]["spec"]["template"]["spec"]["containers"]
        trainer = trainjob["spec"]["trainer"]
    except (KeyError, TypeError, ValueError) as missing:
        raise ManifestError(f"not a ClusterTrainingRuntime with one replicated job {NODE!r}: {missing}") from None
    matching = [c for c in containers if c.get("name") == NODE]
    if not matching:
        raise ManifestError(f"the runtime's {NODE} pod has no container named {NODE!r}")
    container = dict(matching[0])
    for key in ("image", "command"):
        if key in trainer:
            container[key] = trainer[key]
    env = {entry["name"]: entry for entry in container.get("env", [])}
    env.update({entry["name"]: entry for entry in trainer.get("env", [])})
    container["env"] = list(env.values())
    return container


def trainer_v2_variables(trainjob: dict[str, Any], node_rank: int) -> dict[str, str]:
    """The PET_* variables of node `node_rank`'s container on the cluster."""
    name, trainer = trainjob["metadata"]["name"], trainjob["spec"]["trainer"]
    return {
        "PET_NNODES": str(trainer["numNodes"]),
        "PET_NPROC_PER_NODE": str(trainer["numProcPerNode"]),
        "PET_NODE_RANK": str(node_rank),
        "PET_MASTER_ADDR": f"{name}-{NODE}-0-0.{name}",
        "PET_MASTER_PORT": str(TRAINER_V2_PORT),
    }


def local_variables(master_port: int, nproc_per_node: int = LOCAL_NPROC_PER_NODE) -> dict[str, str]:
    return {
        "PET_NPROC_PER_NODE": str(nproc_per_node),
        "PET_MASTER_ADDR": LOOPBACK,
        "PET_MASTER_PORT": str(master_port),
    }


def trainjob_plan(
    runtime: dict[str, Any],
    trainjob: dict[str, Any],
    work_dir: Path,
    metrics_port: int,
    master_port: int,
    stand_ins: dict[str, str] | None = None,
    workers: WorkerOptions = DEFAULT_WORKERS,
) -> LocalPlan:
    """The agents to start for the TrainJob, meeting on 127.0.0.1:`master_port`, with files under `work_dir`, the
    container variables `stand_ins` (the local S3 API's) in place of the TrainJob's, and the `workers` each agent
    starts."""
    container = local_container(node_container(runtime, trainjob), work_dir, stand_ins or {})
    given = sorted(set(container.flags) & set(TRAINER_V2_FLAGS))
    if given:
        raise ManifestError(f"the command sets --{', --'.join(given)}, which Trainer v2 sets from the TrainJob")
    job = trainjob["metadata"]["name"]
    nodes = int(trainjob["spec"]["trainer"]["numNodes"])
    cluster = trainer_v2_variables(trainjob, node_rank=0)
    local = local_variables(master_port, workers.nproc_per_node)
    changes = [f"{name}={value} (cluster: {cluster[name]})" for name, value in local.items()]
    trainer, args, trainer_changes = local_trainer(container, metrics_port, range(nodes, nodes + 1), workers)
    changes += trainer_changes
    argv = launcher_argv(container, container.flags, args)
    agents = [
        AgentLaunch(
            name=f"{job}-{NODE}-0-{rank}",  # the pod's host name: <jobset>-<replicated job>-<job index>-<pod index>
            argv=list(argv),
            env={
                **container.agent_environment({**trainer_v2_variables(trainjob, rank), **local}),
                NODE_NAME_VARIABLE: local_node_name(rank),
                RESTART_ATTEMPT_VARIABLE: "0",  # the JobSet's first attempt; with_gang_restart sets the later ones
            },
            trainer=trainer,
        )
        for rank in range(nodes)
    ]
    nproc = int(trainjob["spec"]["trainer"]["numProcPerNode"])
    rendezvous = f"static on {LOOPBACK}:{master_port}"
    volumes = tuple(container.mounts.values())
    return LocalPlan(job, nodes, 0, NEVER, rendezvous, nproc, agents, changes, volumes, workers.nproc_per_node)


def with_gang_restart(plan: LocalPlan, master_port: int, restarts: int) -> LocalPlan:
    """The same agents as the JobSet's restart number `restarts` creates them: labelled with it (JobSet's
    restart-attempt label, which the node container reads through the downward API), and meeting on another port, as
    a restarted gang starts a fresh static rendezvous."""
    variables = {"PET_MASTER_PORT": str(master_port), RESTART_ATTEMPT_VARIABLE: str(restarts)}
    agents = [dataclasses.replace(a, env={**a.env, **variables}) for a in plan.agents]
    return dataclasses.replace(plan, agents=agents, rendezvous_id=f"static on {LOOPBACK}:{master_port}")
