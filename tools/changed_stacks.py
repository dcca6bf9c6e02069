"""Which stacks a pull request changes, for the preview matrix of .github/workflows/pull-request.yml.

A stack is changed when its Pulumi.<stack>.yaml changed, or when anything every stack is built from changed (the
program, its dependencies, the trainer image's sources, the policy pack): then every stack is previewed. Docs,
tests and workflow edits change no stack. Runs on a bare runner: standard library and git only.

    python -m tools.changed_stacks --base origin/main                 # prints a JSON list
    python -m tools.changed_stacks --base "$BASE_SHA" --github-output "$GITHUB_OUTPUT"   # stacks=[...]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
STACK_FILE = re.compile(r"^Pulumi\.(?P<stack>[^/]+)\.yaml$")
# Paths whose change can change every stack's preview: the program and its inputs, the image the job runs
# (its content tag is part of the job), and the pack that judges them.
SHARED_PATHS = ("__main__.py", "Pulumi.yaml", "requirements.txt", "infra/", "workloads/", "trainer/", "docker/",
                "policy/")


def stack_names(root: Path = PROJECT_ROOT) -> list[str]:
    return sorted(m.group("stack") for p in root.glob("Pulumi.*.yaml") if (m := STACK_FILE.match(p.name)))


def affected_stacks(changed_files: Iterable[str], stacks: Iterable[str]) -> list[str]:
    """The stacks (of those that still exist) whose preview the changed files can change."""
    existing, changed = sorted(stacks), list(changed_files)
    if any(path == shared or (shared.endswith("/") and path.startswith(shared))
           for path in changed for shared in SHARED_PATHS):
        return existing
    named = {m.group("stack") for path in changed if (m := STACK_FILE.match(path))}
    return [stack for stack in existing if stack in named]


def changed_files(base: str, root: Path = PROJECT_ROOT) -> list[str]:
    """Files changed between the merge base of `base` and HEAD (what the pull request itself changes)."""
    result = subprocess.run(["git", "diff", "--name-only", f"{base}...HEAD"], cwd=root, check=True,
                            capture_output=True, text=True)
    return [line for line in result.stdout.splitlines() if line]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the pull request's base commit or ref")
    parser.add_argument("--github-output", type=Path, help="append `stacks=<json>` to this file ($GITHUB_OUTPUT)")
    args = parser.parse_args(argv)
    stacks = json.dumps(affected_stacks(changed_files(args.base), stack_names()))
    if args.github_output:
        with args.github_output.open("a") as out:
            out.write(f"stacks={stacks}\n")
    print(stacks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
