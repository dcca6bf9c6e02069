"""Run __main__.py under Pulumi mocks for a stack, in a subprocess, with config passed as the engine passes it.

    run = run_program("p5-16")                 # the stack file as it is
    run = run_program("p5-16", {"fsdp-eks:gpuNodes": {"count": -1}})   # with keys replaced
    run.of_type("aws:ec2/launchTemplate:LaunchTemplate")

A fresh process per run keeps the Pulumi runtime's global state from leaking between stacks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from stack.config import JobConfig
from stack.fields import NAMESPACE
from stack.files import raw_stack_config
from stack.gated_models import HF_TOKEN_KEY, gated_repo
from stack.paths import PROJECT_ROOT

# The token the README sets before the first preview of a stack whose model is gated: `pulumi preview` refuses such a
# stack without it (stack/gated_models.py), and the runs of its file stand for the stack as deployed.
PLACEHOLDER_HF_TOKEN = "hf_placeholder_for_mock_runs"


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


def engine_config(raw: dict[str, Any]) -> str:
    """PULUMI_CONFIG as the engine sets it: a JSON object of "namespace:key" to string values, objects and
    lists serialised as JSON text."""
    return json.dumps({k: v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()})


def run_program(
    stack: str,
    overrides: dict[str, Any] | None = None,
    secrets: dict[str, str] | None = None,
    preview: str = "update",
) -> ProgramRun:
    """Overrides replace whole top-level keys; a value of None removes the key. `preview` "update" (the stack
    exists) or "first" (nothing exists yet) runs the program as that kind of preview sees it
    (tests/harness/preview_runs.py). A stack file whose model is gated runs with a placeholder Hugging Face token,
    as the README deploys it (documented_secrets); `secrets` adds to it or replaces it."""
    raw = raw_stack_config(stack) if (PROJECT_ROOT / f"Pulumi.{stack}.yaml").exists() else {}
    secrets = {**documented_secrets(raw), **(secrets or {})}
    for key, value in (overrides or {}).items():
        if value is None:
            raw.pop(key, None)
        else:
            raw[key] = value
    raw |= secrets or {}
    return _run(stack, engine_config(raw), json.dumps(sorted(secrets or {})), preview)


def documented_secrets(raw: dict[str, Any]) -> dict[str, str]:
    """The secrets the README sets for a stack file before its first preview: the Hugging Face token when the
    file's own model is gated (a test that changes the model to a gated one decides about the token itself)."""
    if not raw:  # no stack file: the test gives the whole config
        return {}
    job = raw.get(f"{NAMESPACE}:job") or {}
    model = job.get("model", JobConfig().model) if isinstance(job, dict) else JobConfig().model
    return {f"{NAMESPACE}:{HF_TOKEN_KEY}": PLACEHOLDER_HF_TOKEN} if gated_repo(model) else {}


@lru_cache(maxsize=32)
def _run(stack: str, config_json: str, secret_keys_json: str, preview: str) -> ProgramRun:
    env = {**os.environ, "PULUMI_CONFIG": config_json, "PULUMI_CONFIG_SECRET_KEYS": secret_keys_json}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        completed = subprocess.run(
            [sys.executable, "-m", "tests.harness.mock_runner", stack, str(out), preview],
            cwd=PROJECT_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if not out.exists():
            raise RuntimeError(f"mock run of {stack} crashed:\n{completed.stdout}\n{completed.stderr}")
        data = json.loads(out.read_text())
    return ProgramRun(
        stack,
        registered(data["resources"]),
        data["outputs"],
        data["error"],
        data.get("log", []),
        data.get("invokes", []),
    )
