"""The reviewer's summary: nodes, GPUs, cost per hour and where its price comes from, memory per GPU and fit for
each stack, before and after."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import yaml

from sizing.catalog import CATALOG_PRICES_SET
from stack.fields import NAMESPACE
from stack.files import load_stack_config, stack_names
from stack.paths import PROJECT_ROOT
from stack.price_list import SOURCE_CATALOG, SOURCE_CONFIG
from tools.pr_summary import COMMENT_MARKER, WITHOUT_AWS, markdown, summarize


def test_every_stack_is_summarized_from_its_config() -> None:
    for stack in stack_names():
        summary, config = summarize(stack), load_stack_config(stack)
        assert summary.error is None
        assert (summary.nodes, summary.gpus) == (config.gpu_nodes.count, config.total_gpus)
        assert summary.gpu_memory_gib == config.gpu_nodes.instance.gpu_memory_gib


def test_without_aws_the_cost_is_at_the_catalogs_price_labelled_as_the_fallback_and_dated() -> None:
    for stack in stack_names():
        summary, config = summarize(stack), load_stack_config(stack)
        assert config.gpu_nodes.price_per_hour is None  # no shipped stack names its own price
        price = config.gpu_nodes.instance.price_per_hour_usd
        assert summary.cost_per_hour == round(config.gpu_nodes.count * price, 2)
        assert (summary.price_source, summary.price_as_of) == (SOURCE_CATALOG, CATALOG_PRICES_SET)
        assert summary.price_note is not None and summary.price_note.endswith(WITHOUT_AWS)
    row = next(line for line in markdown([summarize("p5-2")], None).splitlines() if line.startswith("| p5-2 |"))
    assert f"| $196.64 | {SOURCE_CATALOG}, {CATALOG_PRICES_SET} |" in row


def test_the_teams_own_price_is_used_and_named(tmp_path: Path) -> None:
    stack_file = yaml.safe_load((PROJECT_ROOT / "Pulumi.p5-2.yaml").read_text())
    stack_file["config"][f"{NAMESPACE}:gpuNodes"]["pricePerHour"] = 50
    (tmp_path / "Pulumi.p5-2.yaml").write_text(yaml.safe_dump(stack_file))
    summary = summarize("p5-2", tmp_path)
    assert (summary.cost_per_hour, summary.price_source, summary.price_as_of) == (100.0, SOURCE_CONFIG, "")
    assert f"| $100.00 | {SOURCE_CONFIG} |" in markdown([summary], None)


def test_the_reference_job_fits_with_its_memory_per_gpu_shown() -> None:
    summary = summarize("p5-16")
    memory = summary.memory_per_gpu_gib
    assert summary.fits is True and memory is not None and 0 < memory < 80


def test_the_comment_has_one_row_per_stack_and_starts_with_its_marker() -> None:
    text = markdown([summarize(s) for s in stack_names()], None)
    assert text.startswith(COMMENT_MARKER + "\n")
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| Stack")]
    assert len(rows) == len(stack_names())


def test_a_change_shows_before_and_after_and_the_changed_stack_comes_first() -> None:
    now = summarize("p5-2")
    before = dataclasses.replace(now, nodes=1, gpus=8, cost_per_hour=98.32)
    text = markdown([summarize("dev"), now], {"dev": summarize("dev"), "p5-2": before}, changed=["p5-2"])
    rows = [line for line in text.splitlines() if line.startswith("| ") and "Stack" not in line]
    assert rows[0].startswith("| **p5-2** |")
    assert "1 → **2**" in rows[0] and "8 → **16**" in rows[0] and "$98.32 → **$196.64**" in rows[0]
    assert "→" not in rows[1]


def test_new_and_removed_stacks_are_marked() -> None:
    text = markdown([summarize("dev")], {"p5-1": summarize("p5-1")})
    assert "| dev (new) |" in text and "~~p5-1~~ (removed)" in text


def test_a_job_that_does_not_fit_is_flagged() -> None:
    misfit = dataclasses.replace(summarize("p5-1"), memory_per_gpu_gib=301.2, fits=False)
    assert "**NO**" in markdown([misfit], None)


def test_the_summary_reads_the_base_stacks_from_git() -> None:
    result = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    from tools.pr_summary import base_summaries

    base = base_summaries(result.stdout.strip())
    committed = subprocess.run(
        ["git", "ls-files", "Pulumi.*.yaml"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert sorted(base) == sorted(name[len("Pulumi.") : -len(".yaml")] for name in committed)
