"""The fork server that runs the Pulumi program for the tests (tests/harness/fork_server.py): each run sees exactly
its own argv, directory and environment, as `python -m` would give it, imports the project's modules afresh, finds
the third-party modules of earlier runs loaded, and gives back its exit status and output (stdout and stderr apart
where asked); a run past its time is stopped. Runs through it, whichever runners warmed it, record what a new
interpreter records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stack.files import raw_stack_config
from stack.paths import PROJECT_ROOT
from tests.harness.fork_server import ForkServer
from tests.harness.pulumi_program import engine_config

PROBE = "tests.harness.probe_runner"


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    started = ForkServer()
    yield started
    started.close()


def probe(server: ForkServer, tmp_path: Path, env: dict[str, str], *args: str, timeout: float = 60) -> dict[str, Any]:
    out = tmp_path / "seen.json"
    status = server.run(PROBE, [str(out), *args], env, PROJECT_ROOT, tmp_path / "log", timeout)
    return {"status": status, "log": (tmp_path / "log").read_text(), **json.loads(out.read_text())}


def test_a_run_sees_its_own_argv_directory_and_environment_as_python_m_gives_them(
    server: ForkServer, tmp_path: Path
) -> None:
    seen = probe(server, tmp_path, {"PATH": os.environ["PATH"], "PROBE_VALUE": "one"})
    assert seen["argv"] == [str(PROJECT_ROOT / "tests/harness/probe_runner.py"), str(tmp_path / "seen.json")]
    assert (seen["cwd"], seen["name"], seen["status"]) == (str(PROJECT_ROOT), "__main__", 0)
    assert seen["env"] == {"PATH": os.environ["PATH"], "PROBE_VALUE": "one"}  # nothing of the server's own


def test_each_run_imports_the_projects_modules_afresh_and_finds_third_party_ones_loaded(
    server: ForkServer, tmp_path: Path
) -> None:
    first = probe(server, tmp_path, dict(os.environ))
    second = probe(server, tmp_path, dict(os.environ))
    assert first["imported"] == ["yaml", "stack.paths"]
    assert "stack.paths" not in second["loaded_at_start"]  # the first run's import stayed in the first run
    assert "yaml" in second["loaded_at_start"]


def test_a_run_gives_back_its_exit_status_and_its_output(server: ForkServer, tmp_path: Path) -> None:
    assert probe(server, tmp_path, dict(os.environ), "3")["status"] == 3
    out = tmp_path / "never.json"
    status = server.run(PROBE, [], dict(os.environ), PROJECT_ROOT, tmp_path / "log", 60)  # OUT missing: a crash
    assert status == 1
    assert "ValueError" in (tmp_path / "log").read_text()
    assert not out.exists()


def test_a_runs_stdout_and_stderr_kept_apart_are_what_a_new_interpreter_writes(
    server: ForkServer, tmp_path: Path
) -> None:
    expected = subprocess.run(
        [sys.executable, "-m", PROBE, str(tmp_path / "new.json"), "refused"],
        cwd=PROJECT_ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    args = [str(tmp_path / "served.json"), "refused"]
    status = server.run(PROBE, args, dict(os.environ), PROJECT_ROOT, tmp_path / "out", 60, err=tmp_path / "err")
    assert (status, (tmp_path / "out").read_text(), (tmp_path / "err").read_text()) == (
        expected.returncode, expected.stdout, expected.stderr,
    )  # fmt: skip
    assert (expected.returncode, expected.stdout, expected.stderr) == (1, "to stdout\n", "to stderr\nrefused\n")


def test_a_run_past_its_time_is_stopped_and_the_next_run_gets_a_new_server(server: ForkServer, tmp_path: Path) -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        probe(server, tmp_path, dict(os.environ), "0", "60", timeout=1)
    assert probe(server, tmp_path, dict(os.environ))["status"] == 0


def canonical(record: dict[str, Any]) -> dict[str, Any]:
    """A program run's record without what a new interpreter changes at random: the SDK collects a resource's
    dependencies in sets, so their order follows the interpreter's string hashing, and so does the order in which
    some registrations arrive."""
    resources = [
        {
            **r,
            "dependencies": sorted(r["dependencies"]),
            "propertyDependencies": {k: sorted(v) for k, v in r["propertyDependencies"].items()},
        }
        for r in record["resources"]
    ]
    return {**record, "resources": sorted(resources, key=lambda r: r["urn"])}


PROGRAM = ("tests.harness.mock_runner", ["p5-16", "{out}", "update"])
COMPONENTS = ("tests.workloads.job.job_component_program", ["dev", "{out}"])
PLATFORM = ("tests.workloads.platform.platform_program", ["p5-16", "{out}"])


def served(server: ForkServer, tmp_path: Path, env: dict[str, str], run: tuple[str, list[str]]) -> dict[str, Any]:
    out = tmp_path / f"served-{len(list(tmp_path.iterdir()))}.json"
    runner, argv = run
    status = server.run(runner, [a.format(out=out) for a in argv], env, PROJECT_ROOT, tmp_path / "log", 300)
    assert status == 0, (tmp_path / "log").read_text()
    return json.loads(out.read_text())


def fresh(tmp_path: Path, env: dict[str, str], run: tuple[str, list[str]]) -> dict[str, Any]:
    out = tmp_path / "fresh.json"
    runner, argv = run
    subprocess.run(
        [sys.executable, "-m", runner, *[a.format(out=out) for a in argv]], cwd=PROJECT_ROOT, env=env, check=True
    )
    return json.loads(out.read_text())


@pytest.mark.program
def test_runs_through_a_server_warmed_by_other_runners_record_what_a_new_interpreter_records(
    server: ForkServer, tmp_path: Path
) -> None:
    """The server loads what each kind of run used (the program, a component on its own, the platform), in the order
    that kind loaded it; a run of another kind after it still records exactly what it records on its own."""
    env = {**os.environ, "PULUMI_CONFIG": engine_config(raw_stack_config("p5-16")), "PULUMI_CONFIG_SECRET_KEYS": "[]"}
    component_env = {**os.environ, "PULUMI_CONFIG": json.dumps({"aws:region": "us-east-1"})}
    served(server, tmp_path, env, PROGRAM)
    components = served(server, tmp_path, component_env, COMPONENTS)
    served(server, tmp_path, dict(os.environ), PLATFORM)
    program = served(server, tmp_path, env, PROGRAM)
    assert program["error"] is None and len(program["resources"]) > 50
    assert canonical(program) == canonical(fresh(tmp_path, env, PROGRAM))
    assert len(components["resources"]) > 5
    assert canonical(components) == canonical(fresh(tmp_path, component_env, COMPONENTS))
