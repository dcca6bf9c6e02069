"""Process trees of the local run: find every process an agent started, and kill all of them, as losing a pod does.

torchrun starts each worker in a session of its own, so killing the agent's process group leaves the workers
running; only the parent/child links lead from an agent to its workers. They are read from /proc (Linux), or from
`ps` where there is no /proc. A process is identified by its pid and start time, so a pid the kernel reused for
an unrelated process is never signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from trainer.base.pod.parent_death import set_parent_death_signal, stat_fields

PROC = Path("/proc")


def die_with_parent() -> None:
    """preexec_fn: have the kernel SIGTERM this child when the runner dies, even by SIGKILL (Linux only), so a
    crashed runner leaves no etcd or agent behind. Elsewhere a no-op; the runner's own cleanup still applies."""
    set_parent_death_signal(signal.SIGTERM)


@dataclass(frozen=True)
class Proc:
    pid: int
    start: str  # start time as the OS reports it; with the pid, unique for the machine's uptime


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, start time) for every process that has not exited (zombies left out)."""
    table: dict[int, tuple[int, str]] = {}
    if PROC.is_dir():
        for entry in PROC.iterdir():
            if not entry.name.isdigit():
                continue
            fields = stat_fields(entry.name)
            if fields is None:
                continue  # exited while we looked
            if fields[0] != "Z":  # state, ppid, starttime: fields 3, 4 and 22 of proc(5)'s stat
                table[int(entry.name)] = (int(fields[1]), fields[19])
        return table
    listing = subprocess.run(["ps", "-A", "-o", "pid=,ppid=,stat=,lstart="], capture_output=True, text=True).stdout
    for line in listing.splitlines():
        pid, ppid, state, *start = line.split()
        if not state.startswith("Z"):
            table[int(pid)] = (int(ppid), " ".join(start))
    return table


def process_tree(root_pid: int) -> list[Proc]:
    """The root and all its descendants, root first; empty when the root is gone."""
    table = _proc_table()
    if root_pid not in table:
        return []
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    tree, pending = [], [root_pid]
    while pending:
        pid = pending.pop()
        tree.append(Proc(pid, table[pid][1]))
        pending.extend(children.get(pid, []))
    return tree


def alive(proc: Proc) -> bool:
    entry = _proc_table().get(proc.pid)
    return entry is not None and entry[1] == proc.start


def signal_all(procs: list[Proc], signum: int) -> None:
    """Send `signum` to each process still alive as the same process (not a reused pid)."""
    table = _proc_table()
    for proc in procs:
        entry = table.get(proc.pid)
        if entry is not None and entry[1] == proc.start:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.pid, signum)


def kill_tree(root_pid: int, known: list[Proc] | None = None) -> list[Proc]:
    """SIGKILL the root, every descendant, and `known` processes seen in its tree before (workers that an agent
    already lost track of are reparented and no longer below it). The tree is read before any signal is sent:
    once the agent dies, its workers are reparented and cannot be found through it any more."""
    procs = list(dict.fromkeys(process_tree(root_pid) + list(known or [])))
    signal_all(procs, signal.SIGKILL)
    return procs
