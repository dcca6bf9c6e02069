"""Commit subjects of at most 72 characters (tools/commit_subjects.py), over a pull request's own commits after the
commit the rule starts from: read from a real git repository made here, and run by the pull request's workflow."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.workflows.workflows import WORKFLOWS, load
from tools.commit_subjects import MAX_SUBJECT, Commit, new_commits, too_long

PR = load(WORKFLOWS / "pull-request.yml")


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.com", "GIT_COMMITTER_NAME": "a"}
    env |= {"GIT_COMMITTER_EMAIL": "a@example.com", "HOME": str(repo), "GIT_CONFIG_NOSYSTEM": "1"}
    result = subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True)
    return result.stdout.strip()


def _commit(repo: Path, message: str) -> str:
    _git(repo, "commit", "--allow-empty", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def test_a_subject_of_72_characters_passes_and_one_of_73_does_not() -> None:
    at_limit, over = Commit("a" * 40, "x" * MAX_SUBJECT), Commit("b" * 40, "y" * (MAX_SUBJECT + 1))
    assert too_long([at_limit]) == []
    (problem,) = too_long([at_limit, over])
    assert problem.startswith("bbbbbbbbbbbb: subject of 73 characters")


def test_the_limit_counts_characters_not_bytes() -> None:
    assert too_long([Commit("c" * 40, "é" * MAX_SUBJECT)]) == []


def test_only_the_pull_requests_commits_after_the_rules_start_are_read(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q", "-b", "main")
    _commit(tmp_path, "an old subject " * 10)  # before the rule: as it was
    start = _commit(tmp_path, "the rule starts after this commit")
    base = _commit(tmp_path, "main's own commit with a subject far longer than seventy-two characters, left alone")
    _git(tmp_path, "checkout", "-q", "-b", "change")
    short = _commit(tmp_path, "a short subject\n\nand the detail in the body, " + "as long as it needs " * 10)
    long = _commit(tmp_path, "a change whose subject goes on and on and on, well past the seventy-two characters")
    commits = new_commits(base, tmp_path, since=start)
    assert [c.sha for c in commits] == [long, short]
    assert [p.split(":")[0] for p in too_long(commits)] == [long[:12]]


def test_a_merge_is_not_read(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q", "-b", "main")
    start = _commit(tmp_path, "start")
    _git(tmp_path, "checkout", "-q", "-b", "change")
    _commit(tmp_path, "the change")
    _git(tmp_path, "checkout", "-q", "main")
    _commit(tmp_path, "main moves on")
    _git(tmp_path, "merge", "-q", "--no-ff", "-m", "a merge commit whose subject GitHub writes, " * 3, "change")
    assert {c.subject for c in new_commits(start, tmp_path, since=start)} == {"the change", "main moves on"}


def test_every_pull_request_checks_its_commits_subjects_with_their_history() -> None:
    (job,) = [job for job in PR["jobs"].values() if "tools.commit_subjects" in str(job)]
    checkout, _, check = job["steps"]
    assert checkout["with"]["fetch-depth"] == 0  # the base and SUBJECTS_FROM, not only the merge commit
    assert check["run"] == 'python -m tools.commit_subjects --base "$BASE_SHA"'
    assert check["env"]["BASE_SHA"] == "${{ github.event.pull_request.base.sha }}"
