"""The throughput model against published FSDP runs: docs/sizing.md's table is the model's, and every row is within
15% of the published figure or says why not."""

from __future__ import annotations

import pytest

from sizing.published import PUBLISHED_RUNS, comparisons, markdown_table
from sizing.throughput import default_mfu
from stack.paths import PROJECT_ROOT

DOC = PROJECT_ROOT / "docs" / "sizing.md"
MARKER = "<!-- published-runs -->"

# How far the model may be off a published run before the run needs an explanation.
MAX_ERROR = 0.15


def doc_table() -> str:
    lines = DOC.read_text().split(MARKER, 1)[1].strip().splitlines()
    table = []
    for line in lines:
        if not line.startswith("|"):
            break
        table.append(line)
    return "\n".join(table)


def test_the_doc_table_is_computed_from_the_model() -> None:
    assert doc_table() == markdown_table(comparisons())


@pytest.mark.parametrize("row", comparisons(), ids=lambda row: f"{row.run.setup[:40]} ({row.run.nodes} nodes)")
def test_every_row_is_within_15_percent_or_explained(row) -> None:
    if row.explanation:
        assert abs(row.error) > MAX_ERROR, "an explanation for a row the model gets right is stale"
    else:
        assert abs(row.error) <= MAX_ERROR, f"{row.run.setup}: predicted {row.predicted:,.3f}, off {row.error:+.1%}"


def test_the_comparison_has_the_reference_and_three_more_published_sources() -> None:
    sources = {run.source for run in PUBLISHED_RUNS}
    assert any("scale-llms-with-pytorch-2-0-fsdp-on-amazon-eks-part-2" in source for source in sources)
    assert len(sources) >= 4


def test_the_defaults_are_the_calibrated_ones() -> None:
    assert default_mfu("A100-SXM", 4096) == pytest.approx(0.63)
    assert default_mfu("H100-SXM", 4096) == pytest.approx(0.35)
    # Wider models run nearer peak: the element-wise work grows with h, the multiplies with h^2.
    assert default_mfu("A100-SXM", 8192) > default_mfu("A100-SXM", 5120) > default_mfu("A100-SXM", 4096)
    # H200: H100's die with more memory bandwidth, so less of its time goes to element-wise work.
    assert default_mfu("H200-SXM", 4096) > default_mfu("H100-SXM", 4096)
