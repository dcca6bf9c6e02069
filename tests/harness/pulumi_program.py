"""Run __main__.py under Pulumi mocks for a stack, in a subprocess, with config passed as the engine passes it.

    run = run_program("p5-16")                 # the stack file as it is
    run = run_program("p5-16", {"fsdp-eks:gpuNodes": {"count": -1}})   # with keys replaced
    run.of_type("aws:ec2/launchTemplate:LaunchTemplate")

A fresh process per run keeps the Pulumi runtime's global state from leaking between stacks: each run is a child
forked from a warm server that has loaded the Pulumi SDKs but never run a program (tests/harness/fork_server.py).
A run is made once per test session for each stack, config, secret keys and kind of preview; each call gets a copy
of its own, so a test that changes what it got changes no other test's.
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from stack.fields import NAMESPACE
from stack.files import raw_stack_config
from stack.paths import PROJECT_ROOT
from tests.harness.fork_server import ForkServer


@dataclass(frozen=True)
class Registered:
    type: str
    name: str
    urn: str
    parent: str
    provider: str
    dependencies: list[str]
    delete_before_replace: bool
    replace_on_changes: list[str]
    inputs: dict[str, Any]
    # What the fake provider returned: the id and the outputs (inputs plus computed values), as the engine has them.
    id: str = ""
    outputs: dict[str, Any] = field(default_factory=dict)
    custom: bool = True
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)  # input name -> URNs
    remote: bool = False  # a component its provider constructs (pulumi-eks, kustomize v2, ...)
    retain_on_delete: bool = False  # `pulumi destroy` drops it from the state and leaves it in the cloud
    aliases: list[dict[str, str]] = field(default_factory=list)  # urn, or the spec's name, type and parentUrn
    hooks: dict[str, list[str]] = field(default_factory=dict)  # beforeDelete, afterDelete: the hooks' names


def registered(records: list[dict[str, Any]]) -> list[Registered]:
    """The mock runner's JSON records (tests/harness/mock_runner.py RecordingMonitor) as Registered values."""
    return [
        Registered(
            r["type"],
            r["name"],
            r["urn"],
            r["parent"],
            r["provider"],
            r["dependencies"],
            r["deleteBeforeReplace"],
            r["replaceOnChanges"],
            r["inputs"],
            r.get("id", ""),
            r.get("outputs", {}),
            r.get("custom", True),
            r.get("propertyDependencies", {}),
            r.get("remote", False),
            r.get("retainOnDelete", False),
            r.get("aliases", []),
            r.get("hooks", {}),
        )
        for r in records
    ]


@dataclass(frozen=True)
class ProgramRun:
    stack: str
    resources: list[Registered]
    outputs: dict[str, Any]
    error: dict[str, Any] | None
    log: list[dict[str, str]] = field(default_factory=list)
    invokes: list[str] = field(default_factory=list)  # data-source tokens the program called

    def of_type(self, type_token: str) -> list[Registered]:
        return [r for r in self.resources if r.type == type_token]

    def one(self, type_token: str) -> Registered:
        found = self.of_type(type_token)
        assert len(found) == 1, f"expected one {type_token}, found {[r.name for r in found]}"
        return found[0]

    def by_urn(self, urn: str) -> Registered:
        return next(r for r in self.resources if r.urn == urn)

    def named(self, type_token: str, name: str) -> Registered:
        (found,) = [r for r in self.of_type(type_token) if r.name == name]
        return found

    def warnings(self) -> list[str]:
        return [m["message"] for m in self.log if m["severity"] == "warning"]


JOB_KEY = f"{NAMESPACE}:job"
TOKEN_SECRET_KEY = "hfTokenSecret"


def kept_token_secret(file_job: Any, job: Any) -> Any:
    """A test that replaces the job section changes the job, not where its token lives: the stack file's secret
    name stays, as it would after `pulumi config set --path` of the other job keys. A job that names its own secret
    (or sets it to None) keeps its choice."""
    if not isinstance(file_job, dict) or TOKEN_SECRET_KEY not in file_job or not isinstance(job, dict):
        return job
    return job if TOKEN_SECRET_KEY in job else {**job, TOKEN_SECRET_KEY: file_job[TOKEN_SECRET_KEY]}


CLUSTER_KEY = f"{NAMESPACE}:cluster"
# The deployer's own address, as the preview's fix line sets it (stack/endpoint_access.py OWN_CIDR_FIX): a
# documentation address (RFC 5737 TEST-NET-2).
DEPLOYER_CIDR = "198.51.100.7/32"


def with_deployers_address(raw: dict[str, Any]) -> dict[str, Any]:
    """The stack as its user makes it deployable before a first `pulumi up`: a new cluster whose endpoint no path
    reaches (every shipped stack: the address is the user's own) gets the public endpoint opened to the deployer's
    address, the line the preview's refusal prints. A stack that names a path, or uses an existing cluster, is left
    as it is."""
    cluster = raw.get(CLUSTER_KEY)
    cluster = json.loads(cluster) if isinstance(cluster, str) else dict(cluster or {})
    if cluster.get("existing") in (True, "true") or cluster.get("endpointPublicAccess") in (True, "true"):
        return raw
    if cluster.get("privateAccessCidrs"):
        return raw
    return {**raw, CLUSTER_KEY: {**cluster, "endpointPublicAccess": True, "publicAccessCidrs": [DEPLOYER_CIDR]}}


def engine_config(raw: dict[str, Any]) -> str:
    """PULUMI_CONFIG as the engine sets it: a JSON object of "namespace:key" to string values, objects and
    lists serialised as JSON text."""
    return json.dumps({k: v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()})


def run_program(
    stack: str,
    overrides: dict[str, Any] | None = None,
    secrets: dict[str, str] | None = None,
    preview: str = "update",
    deployable: bool = True,
) -> ProgramRun:
    """Overrides replace whole top-level keys; a value of None removes the key. An override of the job section
    keeps the file's job.hfTokenSecret unless it sets that key itself (kept_token_secret). `preview` "update" (the
    stack exists) or "first" (nothing exists yet) runs the program as that kind of preview sees it
    (tests/harness/preview_runs.py); a first preview runs the stack as its user makes it deployable
    (with_deployers_address) unless `deployable` is False. `secrets` are config keys the engine marks secret (the
    stack's config has none of its own: a test gives one to show what the program does with it)."""
    raw = raw_stack_config(stack) if (PROJECT_ROOT / f"Pulumi.{stack}.yaml").exists() else {}
    for key, value in (overrides or {}).items():
        if value is None:
            raw.pop(key, None)
        else:
            raw[key] = kept_token_secret(raw.get(key), value) if key == JOB_KEY else value
    raw |= secrets or {}
    if preview == "first" and deployable:
        raw = with_deployers_address(raw)
    return copy.deepcopy(_run(stack, engine_config(raw), json.dumps(sorted(secrets or {})), preview))


@cache
def _run(stack: str, config_json: str, secret_keys_json: str, preview: str) -> ProgramRun:
    """The run, once per test session for each stack, config, secret keys and preview (`_run.__wrapped__` runs it
    again, with this process's environment as it is now)."""
    env = {"PULUMI_CONFIG": config_json, "PULUMI_CONFIG_SECRET_KEYS": secret_keys_json}
    return run_in_process("tests.harness.mock_runner", stack, env, preview)


RUN_TIMEOUT_S = 300
SERVER = ForkServer()


def run_module(runner: str, argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """`python -m <runner> *argv` in a fresh process (a child of the warm server) in the project's root, with `env`
    added to this one's: its exit status and its output (stdout and stderr)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "run.log"
        status = SERVER.run(runner, argv, {**os.environ, **(env or {})}, PROJECT_ROOT, log, RUN_TIMEOUT_S)
        return status, log.read_text()


def run_in_process(runner: str, stack: str, env: dict[str, str], preview: str) -> ProgramRun:
    """`python -m <runner> STACK OUT.json PREVIEW` (the mock runner, or a module that plays it with a changed
    cloud) in a fresh process with `env` added to this one's, and its record read back."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        _, output = run_module(runner, [stack, str(out), preview], env)
        if not out.exists():
            raise RuntimeError(f"mock run of {stack} crashed:\n{output}")
        data = json.loads(out.read_text())
    return ProgramRun(
        stack,
        registered(data["resources"]),
        data["outputs"],
        data["error"],
        data.get("log", []),
        data.get("invokes", []),
    )
