"""`make preview` previews the stack named by STACK, and says so when STACK is missing or names no stack file."""

from __future__ import annotations

import os
import subprocess

from stack.files import stack_names
from tests.workflows.workflows import ROOT


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    """`make -n`: prints what would run, runs nothing (no virtualenv, no Pulumi CLI needed)."""
    env = {k: v for k, v in os.environ.items() if k not in ("STACK", "MAKEFLAGS")}
    return subprocess.run(["make", "-n", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_preview_without_a_stack_names_the_stacks_and_runs_nothing() -> None:
    result = _make("preview")
    assert result.returncode != 0
    assert "make preview needs STACK" in result.stderr and all(s in result.stderr for s in stack_names())
    assert "pulumi" not in result.stdout


def test_preview_of_a_stack_without_a_stack_file_fails() -> None:
    result = _make("preview", "STACK=p5-1000")
    assert result.returncode != 0 and "no Pulumi.p5-1000.yaml" in result.stderr


def test_preview_of_a_stack_runs_pulumi_preview_with_the_pack() -> None:
    result = _make("preview", "STACK=p5-16")
    assert result.returncode == 0, result.stderr
    assert "pulumi preview --stack p5-16 --policy-pack policy" in result.stdout


def test_other_targets_do_not_need_a_stack() -> None:
    assert _make("lint").returncode == 0
