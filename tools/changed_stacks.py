"""Which stacks a pull request changes, for the preview matrix of .github/workflows/pull-request.yml.

A stack is changed when its Pulumi.<stack>.yaml changed, or when anything every stack is built from changed (the
program, its dependencies, every input of the trainer image, the policy pack): then every stack is previewed. Docs,
tests and workflow edits change no stack. Runs on a bare runner: standard library and git only (the image's inputs
come from workloads/job/image_source.py, which imports nothing else).

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

from stack.paths import PROJECT_ROOT
from workloads.job.image_source import IMAGE_INPUTS

STACK_FILE = re.compile(r"^Pulumi\.(?P<stack>[^/]+)\.yaml$")
# Paths whose change can change every stack's preview: the program and its dependencies, the pack that judges it,
# and everything the trainer image is built from (its content tag is part of the job): the image's own inputs and
# docker/, which also holds the build's ignore file.
PROGRAM_PATHS = (
    "__main__.py",
    "Pulumi.yaml",
    "requirements.txt",
    "requirements.lock",  # what the preview jobs install, by hash
    "stack/",
    "sizing/",
    "infra/",
    "workloads/",
    "policy/",
)


def _as_prefix(path: Path) -> str:
    return f"{path.as_posix()}/" if (PROJECT_ROOT / path).is_dir() else path.as_posix()


SHARED_PATHS = (*PROGRAM_PATHS, *(_as_prefix(p) for p in IMAGE_INPUTS), "docker/")


def stack_names(root: Path = PROJECT_ROOT) -> list[str]:
    return sorted(m.group("stack") for p in root.glob("Pulumi.*.yaml") if (m := STACK_FILE.match(p.name)))


def affected_stacks(changed_files: Iterable[str], stacks: Iterable[str]) -> list[str]:
    """The stacks (of those that still exist) whose preview the changed files can change."""
    existing, changed = sorted(stacks), list(changed_files)
    if any(
        path == shared or (shared.endswith("/") and path.startswith(shared))
        for path in changed
        for shared in SHARED_PATHS
    ):
        return existing
    named = {m.group("stack") for path in changed if (m := STACK_FILE.match(path))}
    return [stack for stack in existing if stack in named]


def changed_files(base: str, root: Path = PROJECT_ROOT) -> list[str]:
    """Files changed between the merge base of `base` and HEAD (what the pull request itself changes)."""
    result = subprocess.run(
        ["git", "diff", "--name-only", f"{base}...HEAD"], cwd=root, check=True, capture_output=True, text=True
    )
    return [line for line in result.stdout.splitlines() if line]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
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
