"""Keep the workers' connections open after they die, so that their peers block as NCCL's do instead of failing as
gloo's do.

On a GPU node a crashed rank leaves its peers inside the collective, its siblings on the same node and every rank of
the other nodes alike: NCCL learns of no peer's death and waits for the collective's timeout (minutes), their main
threads in C, their other threads running. gloo over TCP instead fails the collective the moment a peer's socket
closes, which the kernel does as the peer dies. To give the local drills the cluster's shape, the runner takes a
duplicate of every connected socket of every worker before the fault (pidfd_getfd(2), Linux 5.6: the runner is
their ancestor, which ptrace's access check allows), so no worker's death, the crash's or a later one, closes a
connection its peers see: they block until their own agent stops them. Once every worker that was alive at the fault
has exited, the duplicates are closed. Listening sockets are not kept: a new attempt's rank 0 binds the ports again.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

from local.procs import Proc, alive

SYS_PIDFD_GETFD = 438  # the same number on every architecture (the syscall table shared since Linux 5.1)
PROC = Path("/proc")


class ConnectionHoldError(OSError):
    """This machine cannot take another process's sockets (no pidfd_getfd, or a seccomp profile that refuses it)."""


def _getfd(pidfd: int, target_fd: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    duplicate = libc.syscall(SYS_PIDFD_GETFD, pidfd, target_fd, 0)
    if duplicate < 0:
        error = ctypes.get_errno()
        raise ConnectionHoldError(error, f"pidfd_getfd: {os.strerror(error)}")
    return duplicate


def socket_fds(pid: int) -> list[int]:
    """The descriptor numbers of `pid`'s sockets (/proc/<pid>/fd links named socket:[inode])."""
    found = []
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        for entry in (PROC / str(pid) / "fd").iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(entry).startswith("socket:"):
                    found.append(int(entry.name))
    return found


def take_connections(pid: int) -> list[socket.socket]:
    """Duplicates, in this process, of `pid`'s connected sockets (listening ones are closed again at once)."""
    taken = []
    pidfd = os.pidfd_open(pid)
    try:
        for target in socket_fds(pid):
            try:
                duplicate = _getfd(pidfd, target)
            except ConnectionHoldError:
                continue  # closed since it was listed
            held = socket.socket(fileno=duplicate)
            if held.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                held.close()
            else:
                taken.append(held)
    finally:
        os.close(pidfd)
    return taken


def check_connection_holding() -> None:
    """Raise ConnectionHoldError where this machine does not let a process take another's descriptors (tried on a
    pipe of this process's own)."""
    read_end, write_end = os.pipe()
    pidfd = os.pidfd_open(os.getpid())
    try:
        os.close(_getfd(pidfd, read_end))
    finally:
        for fd in (pidfd, read_end, write_end):
            os.close(fd)


@dataclass
class HeldConnections:
    """The connections of `owners` (the workers alive at the fault), open until every one of them has exited."""

    owners: tuple[Proc, ...]
    sockets: list[socket.socket] = field(default_factory=list)

    @classmethod
    def take(cls, owners: list[Proc]) -> HeldConnections:
        held = cls(tuple(owners))
        for owner in owners:
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                held.sockets += take_connections(owner.pid)
        return held

    def release_when_owners_are_gone(self) -> bool:
        """Close the connections once no owner is alive; whether they are closed."""
        if self.sockets and not any(alive(owner) for owner in self.owners):
            self.release()
        return not self.sockets

    def release(self) -> None:
        for held in self.sockets:
            held.close()
        self.sockets = []
