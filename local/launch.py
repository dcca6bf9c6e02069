"""From a job's worker container to the command and environment of a torchrun agent: what every job API's local run
builds its agents from. The command is the container's (`python -m trainer.launch`, torchrun in that process), with this
machine's changes; local/pytorchjob/launch.py and local/trainjob/launch.py add each API's variables.

Pure functions of the container (no processes, no torch import). What changes for this machine, and only that:
- one worker process per agent unless asked for more (nprocPerNode is the node's GPU count on the cluster; here there
  are no GPUs, and each worker takes a share of the CPU);
- the agents and workers talk over loopback only;
- the trainer runs on the CPU (gloo), serves its metrics on loopback, and its paths under the pod's volume
  mounts (/checkpoints, /cache) land in the run's local directory, as the volumes would;
- the Hugging Face token is this machine's HF_TOKEN, passed straight through: the local run reads no AWS secret, so
  the pod's HF_TOKEN_SECRET (the Secrets Manager secret the launcher would read, trainer/base/pod/hub_token.py) is
  dropped;
- S3 is the local run's own S3 API: its client variables and the artifacts bucket's variable replace the container's
  (local/artifacts.py), and the command's `$(VAR)` references are expanded from the container's environment as the
  kubelet expands them, so the pod's `--artifacts-uri s3://$(BUCKET_VARIABLE)/...` names the local bucket.
"""

from __future__ import annotations

import dataclasses
import math
import os
import socket
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from stack.paths import PROJECT_ROOT
from trainer.base.flags.config import TrainConfig, parse_args, to_argv
from trainer.base.pod.bad_node import NODE_NAME_FIELD, NODE_NAME_VARIABLE
from trainer.base.pod.exits import LAUNCH_MODULE
from trainer.base.pod.hub_token import SECRET_VARIABLE, TOKEN_VARIABLE
from trainer.base.pod.staging import split_launcher_options
from workloads.job.pod import expand_references

LOOPBACK = "127.0.0.1"
LOCAL_NPROC_PER_NODE = 1  # workers per agent unless the run asks for more (python -m local --nproc-per-node)
# Two agents of two workers on two cores shared with other test runs measured one node's loopback collectives at 0.60,
# then 0.19, of the median node's, and the preflight named it bad. A node twenty times slower than the median is still
# named: the bad-node drill's 200 ms before each collective of a few milliseconds (local/drills/bad_node.py) makes it
# some fifty times slower.
LOCAL_PREFLIGHT_MIN_FRACTION = 0.05
# Variables of an enclosing torchrun or operator that must not leak into the local agents' own launch.
INHERITED_LAUNCH_VARIABLES = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_RUN_ID",
)


def local_node_name(index: int) -> str:
    """The local "node" of the index-th pod: one per pod, as the cluster's one pod per GPU node; what the downward API's
    spec.nodeName gives that pod here (NODE_NAME), and what a bad-node drill taints (local/drills/bad_node.py)."""
    return f"local-node-{index}"


def node_name_changes(container: dict[str, Any]) -> list[str]:
    """The run header's line for the pod's node name, which the kubelet fills in from the downward API."""
    if not any(is_node_name_reference(entry) for entry in container.get("env", [])):
        return []
    return [f"container env: {NODE_NAME_VARIABLE}={local_node_name(0)}, ... one local node per pod (manifest: "
            f"the downward API's {NODE_NAME_FIELD})"]  # fmt: skip


def is_node_name_reference(entry: dict[str, Any]) -> bool:
    """An env entry the kubelet fills with the pod's node name (the downward API): known per pod, not per plan."""
    return entry.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == NODE_NAME_FIELD


def is_label_reference(entry: dict[str, Any]) -> bool:
    """An env entry the kubelet fills with one of the pod's labels (the downward API): the controller that labels the
    pod decides its value, which the local run's model of that controller gives (local/trainjob/pods.py)."""
    return entry.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath", "").startswith("metadata.labels[")


@dataclass(frozen=True)
class WorkerOptions:
    """What the local run sets in each pod's workers beyond the manifest: how many each agent starts, and how often
    the leader logs a step (every step under a drill, whose recovery is timed to the step; None: the manifest's)."""

    nproc_per_node: int = LOCAL_NPROC_PER_NODE
    log_every: int | None = None


DEFAULT_WORKERS = WorkerOptions()


class ManifestError(ValueError):
    """The job's objects are not what this runner can execute; the message names what is off."""


@dataclass(frozen=True)
class AgentLaunch:
    """How to start one worker pod's torchrun agent (what the kubelet would run in the pod)."""

    name: str  # the pod's name (a PyTorchJob's <job>-worker-<index>, a TrainJob's <job>-node-0-<index>)
    argv: list[str]
    env: dict[str, str]  # the container's environment and its controller's PET_* variables, after local changes
    trainer: TrainConfig  # the trainer's arguments as parsed by the trainer's own parser


@dataclass(frozen=True)
class LocalPlan:
    """Every agent of the job, and what the local run changed in the manifest's launch."""

    job: str
    replicas: int
    backoff_limit: int
    restart_policy: str  # the pods' restartPolicy, as their controller reads it
    rendezvous_id: str
    cluster_nproc_per_node: int  # the job's processes per node on the cluster: the node's GPUs
    agents: list[AgentLaunch]
    changes: list[str] = field(default_factory=list)
    volumes: tuple[Path, ...] = ()  # the local directories that stand in for the pods' volumes (the shared file system)
    nproc_per_node: int = LOCAL_NPROC_PER_NODE  # workers per agent here

    @property
    def trainer(self) -> TrainConfig:
        return self.agents[0].trainer


def loopback_interface() -> str:
    """gloo binds to the interface its host name resolves to unless told otherwise; this keeps it on loopback."""
    names = {name for _, name in socket.if_nameindex()} if hasattr(socket, "if_nameindex") else set()
    return "lo0" if "lo0" in names and "lo" not in names else "lo"


def launcher_options(command: list[str]) -> list[str]:
    """The launcher's own options (trainer/base/pod/staging.py LAUNCHER_OPTIONS: --stage-inputs), before torchrun's."""
    _, torchrun_args = split_launcher_options(command[3:])
    return command[3 : len(command) - len(torchrun_args)]


def split_command(command: list[str]) -> tuple[dict[str, str], list[str]]:
    """torchrun's flags (name -> value, in order) and the trainer's arguments after `-m trainer`; the launcher's own
    options before torchrun's are in launcher_options."""
    if command[1:3] != ["-m", LAUNCH_MODULE] or "-m" not in command[3:]:
        expected = f"python -m {LAUNCH_MODULE} ... -m MODULE ..."
        raise ManifestError(f"the container command is not `{expected}`: {command[:3]}")
    module_at = command.index("-m", 3)
    flags: dict[str, str] = {}
    launcher = command[3 + len(launcher_options(command)) : module_at]
    index = 0
    while index < len(launcher):
        token = launcher[index]
        if not token.startswith("--"):
            raise ManifestError(f"unexpected launcher argument {token!r}")
        if "=" in token:
            name, value = token[2:].split("=", 1)
        else:
            index += 1
            name, value = token[2:], launcher[index] if index < len(launcher) else ""
        flags[name.replace("_", "-")] = value
        index += 1
    if command[module_at + 1 : module_at + 2] != ["trainer"]:
        raise ManifestError(f"the container runs module {command[module_at + 1 : module_at + 2]}, not the trainer")
    return flags, command[module_at + 2 :]


def remap_path(value: str, mounts: dict[str, Path]) -> str:
    """A path inside a volume mount, moved to that volume's local directory (other values unchanged)."""
    for mount_path, local in mounts.items():
        if value == mount_path or value.startswith(mount_path.rstrip("/") + "/"):
            return str(local / value[len(mount_path) :].lstrip("/"))
    return value


def volume_directories(container: dict[str, Any], work_dir: Path) -> dict[str, Path]:
    """mountPath -> local directory, for the pod's volumes that hold files (/dev/shm stays the machine's own)."""
    return {
        mount["mountPath"]: work_dir / mount["name"]
        for mount in container.get("volumeMounts", [])
        if not mount["mountPath"].startswith("/dev/")
    }


def container_environment(container: dict[str, Any], mounts: dict[str, Path]) -> dict[str, str]:
    """The container's env entries; a value from a Secret comes from this machine's environment (HF_TOKEN)."""
    env: dict[str, str] = {}
    for entry in container.get("env", []):
        name = entry["name"]
        if "value" in entry:
            env[name] = remap_path(str(entry["value"]), mounts)
        elif is_node_name_reference(entry) or is_label_reference(entry):
            continue  # each agent's own (local_node_name), or the runner's as it runs the pod (a JobSet's label)
        elif name in os.environ:
            env[name] = os.environ[name]
        elif not entry.get("valueFrom", {}).get("secretKeyRef", {}).get("optional", False):
            raise ManifestError(f"the container needs {name} from a Secret; set {name} in this environment")
    return env


def expanded_command(container: dict[str, Any], env: dict[str, str]) -> tuple[dict[str, str], list[str], list[str]]:
    """torchrun's flags and the trainer's arguments with the `$(VAR)` references expanded from `env`, and the
    trainer's arguments as the manifest writes them (what the run header shows the local changes against)."""
    flags, manifest_args = split_command(container["command"])
    expanded = {name: expand_references(value, env) for name, value in flags.items()}
    return expanded, manifest_args, [expand_references(arg, env) for arg in manifest_args]


def stand_in_changes(container: dict[str, Any], stand_ins: dict[str, str]) -> list[str]:
    """The run header's line for the container variables the local run replaces (the S3 API's and the bucket's)."""
    if not stand_ins:
        return []
    manifest = {entry["name"]: entry.get("value", "from a reference") for entry in container.get("env", [])}
    was = {name: f" (manifest: {manifest[name]})" if name in manifest else "" for name in stand_ins}
    return ["container env: " + ", ".join(f"{name}={value}{was[name]}" for name, value in stand_ins.items())]


def hub_token_changes(container: dict[str, Any]) -> list[str]:
    """The run header's line when the manifest names the token's Secrets Manager secret, which the local run does not
    read: where the token comes from instead."""
    named = [e.get("value") for e in container.get("env", []) if e.get("name") == SECRET_VARIABLE]
    if not named:
        return []
    source = f"this machine's {TOKEN_VARIABLE}" if os.environ.get(TOKEN_VARIABLE) else f"none ({TOKEN_VARIABLE} unset)"
    return [f"Hugging Face token: {source} (manifest: Secrets Manager secret {named[0]} via {SECRET_VARIABLE})"]


def local_trainer_config(
    trainer_args: list[str],
    mounts: dict[str, Path],
    metrics_port: int,
    node_counts: range,
    workers: WorkerOptions = DEFAULT_WORKERS,
) -> TrainConfig:
    """The trainer's arguments, parsed by the trainer's own parser, with this machine's changes."""
    config = parse_args(trainer_args)
    schedule = config.schedule
    if schedule.global_batch_size is None:
        # Fixed, so that losing an agent changes the gradient accumulation and not the optimisation: the smallest
        # global batch that divides evenly at every node count of the elastic range.
        per_rank = schedule.batch_size * workers.nproc_per_node
        schedule = replace(schedule, global_batch_size=per_rank * math.lcm(*node_counts))
    return replace(
        config,
        data=replace(config.data, cache_dir=_local_path(config.data.cache_dir, mounts)),
        # gloo on CPU; the manifest asks for cuda so that a GPU node without GPUs fails
        parallel=replace(config.parallel, device="cpu"),
        schedule=schedule,
        checkpoint=replace(
            config.checkpoint,
            directory=_local_path(config.checkpoint.directory, mounts),
            export_hf=_local_path(config.checkpoint.export_hf, mounts),
        ),
        metrics=replace(
            config.metrics,
            file=_local_path(config.metrics.file, mounts),
            log_every=workers.log_every or config.metrics.log_every,
            host=LOOPBACK,
            port=metrics_port,
            peak_tflops=None,  # a GPU's peak makes no MFU for a CPU
        ),
        # The instance type's NVLink and EFA figures say nothing of loopback gloo: the local preflight compares the
        # local nodes with each other only, and on shared cores, where their figures vary with other processes' load.
        preflight=replace(
            config.preflight,
            expect_intra_gb_per_s=0.0,
            expect_inter_gb_per_s=0.0,
            min_fraction=min(config.preflight.min_fraction, LOCAL_PREFLIGHT_MIN_FRACTION),
        ),
    )


def _local_path(path: str | None, mounts: dict[str, Path]) -> str | None:
    return remap_path(path or "", mounts) or None


def changed_flags(manifest: TrainConfig, local: TrainConfig) -> dict[str, tuple[Any, Any]]:
    """flag -> (manifest's value, local value) for each trainer option the local run changes."""
    changed = {}
    for section in dataclasses.fields(manifest):
        before, after = getattr(manifest, section.name), getattr(local, section.name)
        for option in dataclasses.fields(before):
            old, new = getattr(before, option.name), getattr(after, option.name)
            if old != new:
                changed[option.metadata["flag"]] = (old, new)
    return changed


def local_trainer_args(trainer_args: list[str], local: TrainConfig) -> tuple[list[str], list[str]]:
    """The trainer's command line for `local` (the trainer's own `to_argv`), and a line per option that differs
    from the manifest's arguments, for the run's header."""
    changed = changed_flags(parse_args(trainer_args), local)
    shown = {flag: tuple("unset" if value is None else value for value in pair) for flag, pair in changed.items()}
    return to_argv(local), [f"trainer {flag} {new} (manifest: {old})" for flag, (old, new) in shown.items()]


def local_container_environment(
    container: dict[str, Any], mounts: dict[str, Path], stand_ins: dict[str, str]
) -> dict[str, str]:
    """The container's variables as this machine has them: its volume paths moved, the local stand-ins over them
    (without evaluating the manifest's references for those: the stand-in is the value)."""
    replaced = {**container, "env": [e for e in container.get("env", []) if e["name"] not in stand_ins]}
    return {**container_environment(replaced, mounts), **stand_ins}


def agent_environment(container: dict[str, Any], mounts: dict[str, Path], variables: dict[str, str],
                      stand_ins: dict[str, str] | None = None) -> dict[str, str]:  # fmt: skip
    """This machine's environment (PATH, HOME, ...) without the launch variables of any enclosing job, then the
    container's variables with the local stand-ins, the operator's PET_* variables, and what a process on a shared
    CPU needs."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in INHERITED_LAUNCH_VARIABLES and not key.startswith("PET_")
    }
    env.update(local_container_environment(container, mounts, stand_ins or {}))
    env.pop(SECRET_VARIABLE, None)  # the token is this machine's HF_TOKEN, if set (hub_token_changes)
    env.update(variables)
    env.update(
        {
            "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS", "1"),  # a core per process, not a thread per core each
            "GLOO_SOCKET_IFNAME": loopback_interface(),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")])),
        }
    )
    return env


@dataclass(frozen=True)
class LocalContainer:
    """A worker container as the agents run it here: its volumes' local directories, torchrun's flags and the
    trainer's arguments with the `$(VAR)` references expanded, the trainer's arguments as the manifest writes them
    (what the header shows the local changes against), and the container variables the run replaces (`stand_ins`)."""

    spec: dict[str, Any]
    mounts: dict[str, Path]
    flags: dict[str, str]
    manifest_args: list[str]
    trainer_args: list[str]
    stand_ins: dict[str, str]

    def agent_environment(self, variables: dict[str, str]) -> dict[str, str]:
        """An agent's environment with the controller's `variables` (agent_environment)."""
        return agent_environment(self.spec, self.mounts, variables, self.stand_ins)


def local_container(container: dict[str, Any], work_dir: Path, stand_ins: dict[str, str]) -> LocalContainer:
    """`container` with its volumes under `work_dir` and the stand-ins (the local S3 API's) over its variables."""
    mounts = volume_directories(container, work_dir)
    environment = local_container_environment(container, mounts, stand_ins)
    flags, manifest_args, trainer_args = expanded_command(container, environment)
    return LocalContainer(container, mounts, flags, manifest_args, trainer_args, stand_ins)


def local_trainer(
    container: LocalContainer, metrics_port: int, node_counts: range, workers: WorkerOptions
) -> tuple[TrainConfig, list[str], list[str]]:
    """The trainer's config here (local_trainer_config), its command line, and the header's lines for what the run
    changes in the container: the trainer's options, the token's source, the stand-ins, the node's name."""
    trainer = local_trainer_config(container.trainer_args, container.mounts, metrics_port, node_counts, workers)
    args, changes = local_trainer_args(container.manifest_args, trainer)
    spec = container.spec
    changes += [*hub_token_changes(spec), *stand_in_changes(spec, container.stand_ins), *node_name_changes(spec)]
    return trainer, args, changes


def launcher_argv(container: LocalContainer, flags: dict[str, str], trainer_args: list[str]) -> list[str]:
    """The container's command here: `python -m trainer.launch` with this interpreter (the venv's, whatever is on
    PATH), the launcher's own switches as they are (--stage-inputs), torchrun's `flags`, then the trainer's."""
    launcher = [sys.executable, "-m", LAUNCH_MODULE, *launcher_options(container.spec["command"])]
    return [*launcher, *(f"--{name}={value}" for name, value in flags.items()), "-m", "trainer", *trainer_args]
