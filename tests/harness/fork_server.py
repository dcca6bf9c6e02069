"""A warm process that runs `python -m RUNNER ARGS...` for the tests, each run in a child of its own.

A run of the Pulumi program in a new interpreter spends most of its CPU time importing the Pulumi SDKs and building
their typed classes (pulumi_aws, pulumi_kubernetes); docs/architecture.md gives the figures.
This server pays that once. Per run it forks a child; the child takes the run's environment, working directory and
argv, runs the runner module as `python -m` does (runpy, as __main__), and exits. Each child starts from the
server's memory, where no program has ever run, so the Pulumi runtime's global state still never passes from one
run to the next, and each child imports the project's own modules afresh. After each run the server imports the
third-party modules the child used, in the child's order and each package before its modules (a package can bind a
submodule's name to a class of the same name, which an import in another order would undo), so later children find
them loaded.

Protocol, one JSON object per line: the client writes {"runner", "argv", "env", "cwd", "log", "err"}; the server
forks, waits for the child and answers {"status": the child's exit status}. The child's stdout goes to "log", its
stderr to "err", or to "log" too where "err" is null.
The server ends at the end of its input, or when its client ends it.

Usage: python -m tests.harness.fork_server   (started by ForkServer, not by hand)

Only the standard library is imported here: the project's modules stay out of the server's memory.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import runpy
import select
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
import types
from pathlib import Path
from typing import Any, NoReturn, TextIO


def project_modules(root: Path) -> frozenset[str]:
    """The top-level modules of the project at `root`, which every child imports afresh."""
    return frozenset({p.name for p in root.iterdir() if (p / "__init__.py").is_file()} | {"__main__", "__mp_main__"})


def _child(request: dict[str, Any], modules_file: Path) -> NoReturn:
    """Run the request's runner as `python -m` would, in this forked process, and exit with its status."""
    status = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the server's own handler is not the run's
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        log = os.open(request["log"], flags, 0o600)
        err = os.open(request["err"], flags, 0o600) if request.get("err") else os.dup(log)  # one offset for both
        os.dup2(log, 1)
        os.dup2(err, 2)
        os.close(log)
        os.close(err)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)  # the server's requests are not the child's to read
        os.close(null)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        sys.argv = [request["runner"], *request["argv"]]
        runpy.run_module(request["runner"], run_name="__main__", alter_sys=True)
        status = 0
    except SystemExit as done:
        status = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        if not isinstance(done.code, int | None):
            print(done.code, file=sys.stderr)  # as the interpreter does for sys.exit("message")
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            own = project_modules(Path(request["cwd"]))
            used = [m for m in list(sys.modules) if m.split(".", 1)[0] not in own]
            modules_file.write_text(json.dumps(used))
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(status)


def _used_modules(modules_file: Path) -> list[str]:
    """What the child wrote (nothing if it died before writing), the file removed for the next child."""
    try:
        return json.loads(modules_file.read_text())
    except (OSError, ValueError):
        return []
    finally:
        modules_file.unlink(missing_ok=True)


def _preload(modules: list[str]) -> None:
    """Import what a child used that this process has not: later children start with it loaded."""
    for module in modules:
        _load_parents(module)
        if module not in sys.modules:
            # A module a child could import but this process cannot is left to each child, as before.
            with contextlib.suppress(Exception):
                importlib.import_module(module)


def _load_parents(module: str) -> None:
    """Run the packages above `module` that are still lazy (the Pulumi SDKs load their subpackages on first use,
    importlib.util.LazyLoader). Importing a submodule first would run the package only when the import binds the
    submodule to it, and that binding would then replace what the package itself binds to the same name (a class
    named like its module: pulumi_kubernetes.apiextensions.CustomResource)."""
    parts = module.split(".")
    for depth in range(1, len(parts)):
        parent = sys.modules.get(".".join(parts[:depth]))
        if parent is not None and type(parent) is not types.ModuleType:
            with contextlib.suppress(Exception):
                # Any attribute but the few kept for introspection (__name__, __spec__, ...) runs a lazy module.
                getattr(parent, "_loaded_by_the_fork_server", None)


def serve(requests: TextIO, answers: TextIO) -> None:
    with tempfile.TemporaryDirectory() as own:  # the server's own files: the client may remove its own at any time
        modules_file = Path(own) / "modules.json"
        for line in requests:
            request = json.loads(line)
            answers.flush()
            pid = os.fork()
            if pid == 0:
                _child(request, modules_file)
            _, wait_status = os.waitpid(pid, 0)
            used = _used_modules(modules_file)  # read before the answer, while nothing else runs
            answers.write(json.dumps({"status": os.waitstatus_to_exitcode(wait_status)}) + "\n")
            answers.flush()
            _preload(used)


class ForkServer:
    """The client: starts the server on first use, one run at a time, and stops it when this process exits."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        """`env`: the server's own environment (this process's when None), which what the server imports may read
        once, at import (OMP_NUM_THREADS, for torch's OpenMP runtime)."""
        self._env = env
        self._lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None
        self._errors: Any = None
        self.runs = 0  # how many runs it has made: the suite's conftest.py tells which tests start one

    def run(
        self, runner: str, argv: list[str], env: dict[str, str], cwd: Path, log: Path, timeout: float,
        err: Path | None = None,
    ) -> int:  # fmt: skip
        """`python -m runner *argv` in `cwd` (the project's root) with exactly `env`; its stdout in `log`, its stderr
        in `err` (in `log` too when None); its exit status."""
        request = {
            "runner": runner, "argv": argv, "env": env, "cwd": str(cwd), "log": str(log),
            "err": None if err is None else str(err),
        }  # fmt: skip
        with self._lock:
            self.runs += 1
            process = self._started(cwd)
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            ready, _, _ = select.select([process.stdout], [], [], timeout)
            answer = process.stdout.readline() if ready else ""
            if not answer:
                self._stop(process)
                if not ready:
                    raise subprocess.TimeoutExpired([runner, *argv], timeout)
                raise RuntimeError(f"the program server stopped:\n{self._error_text()}")
            return json.loads(answer)["status"]

    def close(self) -> None:
        """Stop the server now (it also stops when this process exits); a later run starts another."""
        with self._lock:
            if self._process is not None:
                self._close(self._process)

    def _started(self, cwd: Path) -> subprocess.Popen[str]:
        if self._process is not None and self._process.poll() is None:
            return self._process
        self._errors = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - read when the server stops, closed with it
        self._process = subprocess.Popen(
            [sys.executable, "-m", __name__],
            cwd=cwd,  # as `python -m` there: the project's root comes first on sys.path
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errors,
            env=self._env,
            text=True,
            start_new_session=True,  # its own process group: a run past its time is stopped with its child
        )
        atexit.register(self._close, self._process)
        return self._process

    def _error_text(self) -> str:
        if self._errors is None:
            return ""
        self._errors.seek(0)
        return self._errors.read()[-5000:]

    @staticmethod
    def _stop(process: subprocess.Popen[str]) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    @staticmethod
    def _close(process: subprocess.Popen[str]) -> None:
        """Between runs the server holds nothing to keep: it is ended at once, whatever modules it is loading."""
        if process.poll() is None:
            process.terminate()
        process.wait()


def _end(signum: int, frame: object) -> None:
    sys.exit(0)  # SIGTERM from the client: leave through the cleanups


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _end)
    serve(sys.stdin, sys.stdout)
