"""Helper processes that end with the process they serve, even when it was killed by SIGKILL and ran no cleanup.

Two users: the local run's services and agents (local/procs.py), which the kernel signals when the runner ends
(Linux's parent-death signal), and the data preparation's tokeniser workers (trainer/data/tokenise.py). Those are
forked by a multiprocessing fork server, so their owner is their grandparent, and no parent-death signal reaches
them. Nor does the fork server end first: each worker holds a copy of the pipe end whose EOF would end it
(multiprocessing/forkserver.py passes it to every child), and each waits for tasks on a pipe whose both ends it holds.
Without a watch of their own, a trainer killed while it tokenises (torchrun restarting its workers, the OOM killer)
leaves its fork server and every worker behind for the pod's life.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import sys
import threading
from pathlib import Path
from typing import NoReturn

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def set_parent_death_signal(signum: int = signal.SIGTERM) -> bool:
    """Have the kernel send `signum` to this process when its parent ends (prctl(2)). False where it cannot (not
    Linux): the caller's own cleanup is then all there is."""
    if not sys.platform.startswith("linux"):
        return False
    with contextlib.suppress(OSError, AttributeError):
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signum) == 0
    return False


def stat_fields(pid: int | str) -> list[str] | None:
    """The fields of /proc/<pid>/stat from the third on (proc(5): state, parent pid, ..., start time at index 19);
    None once the process is gone. The command name in the second field may hold spaces and parentheses, so the
    fields are read after its last ')'."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()


def parent_of(pid: int) -> int | None:
    """The parent pid of process `pid`; None once it is gone."""
    fields = stat_fields(pid)
    return None if fields is None else int(fields[1])


def proc_is_this_namespaces() -> bool:
    """Whether /proc shows this process's PID namespace (a container may mount another's, or none): only then do its
    parent links say anything about this process's ancestry."""
    try:
        return int(Path("/proc/self/stat").read_text().split()[0]) == os.getpid()
    except (OSError, ValueError, IndexError):
        return False


def end_with_owner(owner: int) -> bool:
    """End this process as soon as process `owner`, its parent or its parent's parent, ends. A thread waits on a
    pidfd of the owner (pidfd_open(2), Linux 5.3), which becomes readable when the owner ends, then exits the process
    at once. False where no pidfd can be had: the owner's own shutdown of its workers is then all there is."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return False
    try:
        pidfd = opener(owner)
    except ProcessLookupError:
        _end(f"its owner (pid {owner}) is gone already")
    except OSError:
        return False  # no pidfds in this kernel or sandbox
    # The pidfd names the owner only while the owner is still in this process's ancestry: a pid is reused once its
    # process ends, and a process whose parent ends is handed to a reaper. Where /proc cannot tell, the watch still
    # holds: at worst it names a process that took a dead owner's pid, and this process ends when that one does.
    if owner != os.getppid() and proc_is_this_namespaces():
        grandparent = parent_of(os.getppid())
        if grandparent is not None and grandparent != owner:
            _end(f"its owner (pid {owner}) is gone already: its parent's parent is pid {grandparent}")
    threading.Thread(target=_end_when_readable, args=(pidfd, owner), name="end-with-owner", daemon=True).start()
    return True


def _end_when_readable(pidfd: int, owner: int) -> None:
    waiting = select.poll()  # not select.select, which takes no descriptor from 1024 on
    waiting.register(pidfd, select.POLLIN)
    waiting.poll()
    _end(f"its owner (pid {owner}) ended")


def _end(why: str) -> NoReturn:
    """Exit at once (no cleanup: nobody will read this process's results), saying why on stderr first."""
    print(f"pid {os.getpid()} ends: {why}", file=sys.stderr, flush=True)
    os._exit(1)
