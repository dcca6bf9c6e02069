"""The repository's GitHub Actions workflows, loaded as GitHub reads them, and helpers to walk their steps."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from stack.paths import PROJECT_ROOT as ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
HERE = Path(__file__).resolve().parent
SCHEMA = json.loads((HERE / "github_workflow.schema.json").read_text())
ACTIONS = {k: v for k, v in json.loads((HERE / "action_inputs.json").read_text()).items() if not k.startswith("_")}
EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)


class WorkflowLoader(yaml.SafeLoader):
    """YAML as GitHub reads it: only true/false are booleans. PyYAML's YAML 1.1 rules would turn the `on:` key
    itself (and yes/no/off) into booleans."""


WorkflowLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
WorkflowLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|false)$"), list("tf"))


def load(path: Path) -> dict[str, Any]:
    return yaml.load(path.read_text(), Loader=WorkflowLoader)  # a SafeLoader subclass: no arbitrary objects


def workflow_files() -> list[Path]:
    return sorted(WORKFLOWS.glob("*.yml")) + sorted(WORKFLOWS.glob("*.yaml"))


def steps(workflow: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(job id, job, step) for every step of every job."""
    for job_id, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            yield job_id, job, step


def uses(workflow: dict[str, Any], action: str) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Steps using `action` (owner/name, any version)."""
    return [(j, job, s) for j, job, s in steps(workflow) if str(s.get("uses", "")).split("@")[0] == action]


def expressions(value: Any) -> list[str]:
    """The inside of every ${{ }} in a nested structure."""
    if isinstance(value, dict):
        return [e for k, v in value.items() for e in expressions(k) + expressions(v)]
    if isinstance(value, list):
        return [e for v in value for e in expressions(v)]
    return [m.group(1).strip() for m in EXPRESSION.finditer(value)] if isinstance(value, str) else []
