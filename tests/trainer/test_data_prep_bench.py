"""bench/data_prep.py end to end on a corpus of 1 MB: both sides run, their ids (a digest of each side's id stream, not
only its count) are compared, and their figures are reported; a round whose ids differ is refused."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench import data_prep
from tests.harness.trainer_runs import ROOT


@pytest.mark.slow  # the bench in a process of its own, both sides
def test_the_bench_runs_both_sides_on_the_same_corpus_and_reports_their_ratio(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "bench/data_prep.py", "--size", "1", "--rounds", "1", "--no-memory-sizes", "--workdir",
         str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line.split("|")[1:-1] for line in result.stdout.splitlines() if re.match(r"\| (ours|datasets) \|", line)]
    assert sorted(row[0].strip() for row in rows) == ["datasets", "ours"]
    for row in rows:
        assert all(float(cell) > 0 for cell in row[2:])  # wall s, MB/s, tokens/s, CPU s, RSS, PSS
    assert re.search(r"median throughput ratio ours / datasets over 1 rounds: \d+\.\d\d", result.stdout)
    assert re.search(r"round 1: .*both made the same \d+ ids \(blake2b [0-9a-f]{32}\)", result.stdout)


def run(tokens: int, digest: str, side: str) -> data_prep.Run:
    return data_prep.Run(side, 1, 1.0, 1.0, tokens, 1, 1, digest)


def test_a_round_whose_sides_made_as_many_but_different_ids_is_refused() -> None:
    ids = np.arange(1000, dtype=np.uint32)
    swapped = ids.copy()
    swapped[[10, 11]] = swapped[[11, 10]]  # the same count and the same multiset, in another order
    ours, theirs = data_prep.ids_digest([ids]), data_prep.ids_digest([swapped])
    assert ours != theirs
    data_prep.same_ids({"ours": run(1000, ours, "ours"), "datasets": run(1000, ours, "datasets")})
    with pytest.raises(RuntimeError, match="not the same ids"):
        data_prep.same_ids({"ours": run(1000, ours, "ours"), "datasets": run(1000, theirs, "datasets")})


def test_the_digest_of_arrow_lists_is_the_digest_of_their_ids_in_order(tmp_path: Path) -> None:
    """The datasets side's ids are read from map's cache files (int64 lists in Arrow, uint32 in ours): one digest
    across the files in the shards' order."""
    import datasets

    rows = [[1, 2, 3], [4], [5, 6], [7, 8, 9, 10]]
    files = []
    for index, part in enumerate((rows[:2], rows[2:])):
        shard = datasets.Dataset.from_dict({"input_ids": part})
        filename = str(tmp_path / f"shard-{index}.arrow")
        shard.select(range(len(part))).flatten_indices(cache_file_name=filename)
        files.append(filename)
    expected = data_prep.ids_digest([np.arange(1, 11, dtype=np.uint32)])
    assert data_prep.arrow_digest(files) == expected
    assert data_prep.arrow_digest(files[::-1]) != expected


def test_the_datasets_side_counts_its_ids_without_reading_them_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The datasets side's timed process does what a datasets user does and no more: its ids are counted from the
    Arrow lists' lengths, not read back as Python lists (a pass ours does not make, in its time and memory)."""
    import datasets

    corpus, tokenizer = tmp_path / "corpus.jsonl", tmp_path / "bpe"
    data_prep.make_corpus(corpus, 50_000)
    data_prep.make_tokenizer(corpus, tokenizer)

    mapped = [False]
    map_, iter_ = datasets.Dataset.map, datasets.Dataset.iter

    def map_then_mark(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = map_(self, *args, **kwargs)  # map itself iterates its input's batches
        mapped[0] = True
        return result

    def iter_before_map(self: Any, *args: Any, **kwargs: Any) -> Any:
        assert not mapped[0], "the mapped ids were read back into Python"
        return iter_(self, *args, **kwargs)

    monkeypatch.setattr(datasets.Dataset, "map", map_then_mark)
    monkeypatch.setattr(datasets.Dataset, "iter", iter_before_map)
    # map with num_proc leaves os.environ a copy (datasets' arrow_dataset.py): the original comes back at teardown.
    monkeypatch.setattr(os, "environ", os.environ)
    data_prep.datasets_side(str(corpus), str(tokenizer), str(tmp_path / "cache"), 1)
    tokens = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["tokens"]
    records = corpus.read_text().splitlines()
    assert tokens > 2 * len(records)  # <s> and </s> around each record's ids
