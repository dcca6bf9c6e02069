"""The changes the benchmark makes to its own installed copy of torchtitan apply exactly, once."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.torchtitan_setup import PATCHES, Patch, apply_patch


def test_a_patch_applies_once_and_again_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "utils.py").write_text('device = detect() or "cuda"\n')
    patch = Patch("utils.py", 'detect() or "cuda"', 'detect() or "cpu"', "why")
    apply_patch(tmp_path, patch)
    apply_patch(tmp_path, patch)
    assert (tmp_path / "utils.py").read_text() == 'device = detect() or "cpu"\n'


def test_a_patch_whose_text_is_missing_stops_the_setup(tmp_path: Path) -> None:
    (tmp_path / "utils.py").write_text("something else\n")
    with pytest.raises(SystemExit, match=r"utils\.py"):
        apply_patch(tmp_path, Patch("utils.py", "old text", "new text", "why"))


def test_every_patch_says_why() -> None:
    assert all(patch.why for patch in PATCHES)
