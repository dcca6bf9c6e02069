"""A check's outcome: passed, a problem to fix before `pulumi up`, or a warning; and how the command prints them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Level = Literal["ok", "problem", "warning"]


@dataclass(frozen=True)
class Finding:
    check: str
    """What was checked, such as "EC2 quota"."""
    level: Level
    what: str
    """What was found, in one sentence."""
    fix: str = ""
    """What to do about a problem or a warning: a command where there is one."""


def ok(check: str, what: str) -> Finding:
    return Finding(check, "ok", what)


def problem(check: str, what: str, fix: str) -> Finding:
    return Finding(check, "problem", what, fix)


def warning(check: str, what: str, fix: str = "") -> Finding:
    return Finding(check, "warning", what, fix)


def problems(findings: Iterable[Finding]) -> list[Finding]:
    return [finding for finding in findings if finding.level == "problem"]


def report(findings: list[Finding]) -> list[str]:
    """One line per finding, its fix on the next; then the verdict."""
    lines = []
    for finding in findings:
        lines.append(f"{finding.level.upper():8} {finding.check}: {finding.what}")
        if finding.fix:
            lines.append(f"{'':8} fix: {finding.fix}")
    count = len(problems(findings))
    lines.append(f"{count} problem{'' if count == 1 else 's'}" + (": fix them before pulumi up" if count else ""))
    return lines
