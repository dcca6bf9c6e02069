"""Commit subjects of at most 72 characters, for .github/workflows/pull-request.yml: `git log --oneline` stays
readable, and the detail goes in the body. The check reads the pull request's own commits, and only those after
SUBJECTS_FROM, where the rule starts: older subjects stay as they were. Merges are left out (GitHub makes the pull
request's merge commit). Runs on a bare runner: standard library and git only.

    python -m tools.commit_subjects --base origin/main      # prints each subject over the limit; exit 1 if any
    python -m tools.commit_subjects --base "$BASE_SHA"
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from stack.paths import PROJECT_ROOT

MAX_SUBJECT = 72
# The last commit before the rule: subjects of its descendants are checked. The one place this commit is named.
SUBJECTS_FROM = "632a766f89731998f9e8f2e27ce471dbb09da6f7"
_FIELD = "\x1f"  # git log's %x1f: a separator no subject holds


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str  # what `git log --oneline` shows: the message's first paragraph on one line


def too_long(commits: Iterable[Commit], limit: int = MAX_SUBJECT) -> list[str]:
    """A line for each commit whose subject is over `limit` characters (characters, not bytes)."""
    return [
        f"{c.sha[:12]}: subject of {len(c.subject)} characters (at most {limit}): {c.subject}"
        for c in commits
        if len(c.subject) > limit
    ]


def new_commits(base: str, root: Path = PROJECT_ROOT, since: str = SUBJECTS_FROM) -> list[Commit]:
    """The commits HEAD has and neither `base` nor `since` has, merges left out."""
    result = subprocess.run(
        ["git", "log", "--no-merges", f"--format=%H{_FIELD}%s", f"{base}..HEAD", f"^{since}"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    )
    return [Commit(*line.split(_FIELD, 1)) for line in result.stdout.splitlines() if line]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the pull request's base commit or ref")
    args = parser.parse_args(argv)
    commits = new_commits(args.base)
    problems = too_long(commits)
    for problem in problems:
        print(problem)
    print(f"{len(commits)} commits checked, {len(problems)} with a subject over {MAX_SUBJECT} characters")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
