"""The pull-request comment for a preview that failed: its policy violations and errors, in the place of the Pulumi
action's own comment.

pulumi/actions posts its comment only after the command succeeds (src/main.ts at v6.6.1: the comment follows the
command, whose failure ends the action first), so a mandatory violation would leave the previous, passing comment
on the pull request. The failure step reruns the preview and turns its output into this comment, under the action's
own heading and marker (src/libs/pr.ts: it edits the comment that starts with the heading and contains the
`<summary>Pulumi report</summary>` marker), so the next successful preview replaces it again.

    pulumi preview ... > preview.log 2>&1; python -m tools.preview_comment --stack org/p5-16 --log preview.log
"""

from __future__ import annotations

import argparse
import html
import re
import sys
from pathlib import Path

from stack.paths import PROJECT_ROOT

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
POLICY_LEVEL = re.compile(r"\[(mandatory|advisory|remediate)\]")
SUMMARY_MARKER = "<summary>Pulumi report</summary>"
# GitHub caps a comment at 65,536 characters; the action keeps 64,000 for the output (src/libs/pr.ts).
MAX_REPORT = 60_000


def heading(project: str, stack: str) -> str:
    """The Pulumi action's comment heading for a preview of `stack` (its `stack-name` input)."""
    return f"#### :tropical_drink: `preview` on {project}/{stack}"


def project_name(root: Path = PROJECT_ROOT) -> str:
    """Pulumi.yaml's `name:`, which the action puts in its heading (read without a YAML parser: bare runner)."""
    for line in (root / "Pulumi.yaml").read_text().splitlines():
        if line.startswith("name:"):
            return line.split(":", 1)[1].strip()
    raise ValueError("Pulumi.yaml has no name")


def _section(lines: list[str], title: str) -> list[str]:
    """A top-level section of the CLI's summary ("Policies:", "Diagnostics:"): its title and every indented line
    after it, up to the next unindented line (pulumi/pulumi pkg/backend/display/progress.go prints them so)."""
    found: list[str] = []
    for index, line in enumerate(lines):
        if line.strip() == title and not line.startswith(" "):
            found.append(line)
            for follow in lines[index + 1 :]:
                if follow and not follow.startswith(" "):
                    break
                found.append(follow)
    return found


def _violation_lines(lines: list[str]) -> list[str]:
    """Without a Policies section (the diff display), each `[mandatory]`/`[advisory]` line and its indented
    continuation."""
    found: list[str] = []
    for index, line in enumerate(lines):
        if POLICY_LEVEL.search(line):
            indent = len(line) - len(line.lstrip())
            found.append(line)
            for follow in lines[index + 1 :]:
                if not follow.strip() or len(follow) - len(follow.lstrip()) <= indent or POLICY_LEVEL.search(follow):
                    break
                found.append(follow)
    return found


def report(output: str) -> tuple[list[str], list[str]]:
    """(policy lines, diagnostics lines) of a preview's output."""
    lines = [ANSI.sub("", line).rstrip() for line in output.splitlines()]
    policies = _section(lines, "Policies:") or _violation_lines(lines)
    return policies, _section(lines, "Diagnostics:")


def comment_body(project: str, stack: str, output: str) -> str:
    policies, diagnostics = report(output)
    mandatory = sum(1 for line in policies if "[mandatory]" in line)
    verdict = (
        f":x: **The preview failed**: {mandatory} mandatory policy violation(s)."
        if mandatory
        else ":x: **The preview failed** (no policy violation: see the errors)."
    )
    shown = "\n".join([*policies, "", *diagnostics]).strip() or "\n".join(output.splitlines()[-80:])
    if len(shown) > MAX_REPORT:
        shown = shown[:MAX_REPORT] + "\n... (cut; the job log has all of it)"
    return "\n".join(
        [
            heading(project, stack),
            "",
            verdict,
            "",
            "<details open>",
            SUMMARY_MARKER,
            "",
            "<pre>",
            html.escape(shown),
            "</pre>",
            "</details>",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--stack", required=True, help="the stack name as the Pulumi action was given it")
    parser.add_argument("--log", type=Path, required=True, help="the failed preview's output")
    parser.add_argument("--project", help="default: Pulumi.yaml's name")
    args = parser.parse_args(argv)
    sys.stdout.write(comment_body(args.project or project_name(), args.stack, args.log.read_text(errors="replace")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
