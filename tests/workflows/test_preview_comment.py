"""The comment a failed preview leaves on its pull request: the policy violations and errors, under the Pulumi
action's own heading and marker so the next successful preview edits it in place."""

from __future__ import annotations

from tools.preview_comment import MAX_REPORT, SUMMARY_MARKER, comment_body, heading, project_name

# Laid out as the CLI's progress display prints a failed preview (pulumi/pulumi pkg/backend/display/progress.go:
# printDiagnostics, then printPolicies with `- [level]  name  (type: name)` and the message indented below).
FAILED_PREVIEW = """\
Previewing update (acme/p5-16)

\x1b[1mDiagnostics:\x1b[0m
  pulumi:pulumi:Stack (fsdp-eks-p5-16):
    error: preview failed

\x1b[1mPolicies:\x1b[0m
    \u274c fsdp-eks@v0.0.1 (local: policy)
        - [mandatory]  gpu-node-group-one-az  (aws:eks/nodeGroup:NodeGroup: gpu-nodes)
          p5.48xlarge node group has 2 subnets (availability zones us-east-1a, us-east-1b); give it exactly one
        - [advisory]  gpu-cost-per-hour-budget
          GPU nodes cost about $1,571.84/hour (16 x p5.48xlarge at $98.24), above the budget of $1,000.00/hour

Resources:
    + 97 to create

Duration: 41s
"""


def test_the_comment_carries_the_actions_heading_and_marker_so_the_action_edits_it_later() -> None:
    body = comment_body("fsdp-eks", "acme/p5-16", FAILED_PREVIEW)
    assert body.startswith(heading("fsdp-eks", "acme/p5-16"))
    assert heading("fsdp-eks", "acme/p5-16") == "#### :tropical_drink: `preview` on fsdp-eks/acme/p5-16"
    assert SUMMARY_MARKER in body


def test_the_comment_shows_every_violation_with_its_message_and_the_errors() -> None:
    body = comment_body("fsdp-eks", "acme/p5-16", FAILED_PREVIEW)
    assert "1 mandatory policy violation" in body
    assert "[mandatory]  gpu-node-group-one-az" in body and "2 subnets (availability zones" in body
    assert "[advisory]  gpu-cost-per-hour-budget" in body and "$1,571.84/hour" in body
    assert "error: preview failed" in body
    assert "97 to create" not in body and "\x1b[" not in body


def test_the_diff_display_s_violation_lines_are_found_too() -> None:
    output = (
        "    fsdp-eks@v0.0.1 [mandatory]  launch-template-imdsv2  (aws:ec2/launchTemplate:LaunchTemplate: t)\n"
        "        metadataOptions.httpTokens is 'optional'\n"
        "Resources:\n    ~ 1 to update\n"
    )
    body = comment_body("fsdp-eks", "p5-2", output)
    assert "launch-template-imdsv2" in body and "httpTokens is &#x27;optional&#x27;" in body


def test_a_failure_without_violations_shows_the_end_of_the_output() -> None:
    body = comment_body("fsdp-eks", "p5-2", "line\n" * 200 + "error: could not load plugin\n")
    assert "no policy violation" in body and "could not load plugin" in body


def test_html_in_messages_is_escaped_and_long_reports_are_cut() -> None:
    output = "Policies:\n    \u274c p\n        - [mandatory]  x\n          <script>" + "y" * (2 * MAX_REPORT) + "\n"
    body = comment_body("fsdp-eks", "s", output)
    assert "<script>" not in body and "&lt;script&gt;" in body
    assert len(body) < 65_536


def test_the_project_name_comes_from_pulumi_yaml() -> None:
    assert project_name() == "fsdp-eks"
