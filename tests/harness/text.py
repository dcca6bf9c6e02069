"""Reading a fact out of a file's text in a test: a pattern that must match, or the test fails naming it."""

from __future__ import annotations

import re


def must_search(pattern: str, text: str, flags: int = 0) -> re.Match[str]:
    """re.search's match; an AssertionError naming the pattern when there is none."""
    match = re.search(pattern, text, flags)
    assert match is not None, f"nothing matches {pattern!r}"
    return match


def must_fullmatch(pattern: str, text: str) -> re.Match[str]:
    """re.fullmatch's match; an AssertionError naming the pattern and the text when there is none."""
    match = re.fullmatch(pattern, text)
    assert match is not None, f"{text!r} does not match {pattern!r}"
    return match
