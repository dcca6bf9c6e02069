"""Test-only fault injection: kill this process at a named point, as a node failure or an OOM kill would.

TRAINER_FAULT="<point>:<step>" with point one of
- kill_after_step:  after step <step> (and its checkpoint, if one was due) is complete;
- kill_during_save: in the save of step <step>, after the shards are written into step_<N>.tmp but before
                    the checkpoint is committed (meta.json and the rename);
- sigterm_during_save: SIGTERM instead (as the kubelet stopping the pod would send it), in the save of step <step>
                    once its shards are written (synchronous) or being written (--async-checkpoint), before the commit.
- sigterm_agent_during_save: at the same point, SIGTERM to this process's parent, the torchrun agent: the pod's main
                    process, which is where the kubelet sends it (the agent passes it on to every worker).
- sigterm_starting_save: SIGTERM to this process as the save of step <step> starts, before its write is under way
                    (a signal the agent passes on reaches each rank at a point of its own).
- slow_preflight:   "slow_preflight:<ms>" delays each of this process's timed collectives in the fabric preflight
                    (trainer/checks/fabric_preflight.py) by <ms> milliseconds, as a node with a slow link or GPU would:
                    set on one node's pod (the local run's bad-node drill), or with "@<rank>" on one rank.
"<point>:<step>@<rank>" fires on that global rank only.
Faults fire only in the first attempt (TORCHELASTIC_RESTART_COUNT 0), so a torchrun with --max-restarts
shows the recovery. SIGKILL gives the process no chance to clean up, like the kernel's OOM killer.

TRAINER_FAKE_DISK_BYTES=<bytes> makes the checkpoint directory a file system of that size, used by nothing but the
directory itself (trainer/base/checkpoint/space.py): a full disk without a loop device or root.
"""

from __future__ import annotations

import os
import signal

FAULT_ENV = "TRAINER_FAULT"
FAULT_POINTS = (
    "kill_after_step",
    "kill_during_save",
    "sigterm_during_save",
    "sigterm_agent_during_save",
    "sigterm_starting_save",
)
FAKE_DISK_ENV = "TRAINER_FAKE_DISK_BYTES"
SLOW_PREFLIGHT = "slow_preflight"


def maybe_fault(point: str, step: int) -> None:
    if point not in FAULT_POINTS:
        raise ValueError(f"unknown fault point {point}")
    if os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":
        return
    fault = os.environ.get(FAULT_ENV, "")
    where, _, rank = fault.partition("@")
    if where == f"{point}:{step}" and (not rank or rank == os.environ.get("RANK", "0")):
        target = os.getppid() if point == "sigterm_agent_during_save" else os.getpid()
        os.kill(target, signal.SIGTERM if point.startswith("sigterm") else signal.SIGKILL)


def slow_preflight_fault(ms: int, rank: int | None = None) -> str:
    """The TRAINER_FAULT value that slows the preflight's collectives by `ms` on every rank (or on `rank`)."""
    return f"{SLOW_PREFLIGHT}:{ms}" + ("" if rank is None else f"@{rank}")


def preflight_delay_s() -> float:
    """Seconds to wait before each timed collective of the preflight (slow_preflight); 0 without the fault, and in
    every attempt after the first, as maybe_fault."""
    if os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":
        return 0.0
    where, _, rank = os.environ.get(FAULT_ENV, "").partition("@")
    point, _, ms = where.partition(":")
    if point != SLOW_PREFLIGHT or (rank and rank != os.environ.get("RANK", "0")):
        return 0.0
    return int(ms) / 1000


def fake_disk_bytes() -> int | None:
    """The simulated size of the checkpoint file system, or None for the real one."""
    value = os.environ.get(FAKE_DISK_ENV)
    return int(value) if value else None
