"""The held-out split (--val-split, --val-dataset): records picked by index alone, each in exactly one stream, the
same on every call, about the fraction asked for, and cached as the training stream is."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from trainer.base.errors import InputError
from trainer.base.flags.config import DataConfig, ValidationConfig
from trainer.base.pod.env import DistEnv
from trainer.data.cache import cache_key, cached_splits, dataset_identity
from trainer.data.packed import PackedData
from trainer.data.packing import build_packed_data, build_splits, val_dataset_config
from trainer.data.split import held_out_score, is_held_out
from trainer.data.tokenizer_bytes import BOS_ID, EOS_ID, ByteTokenizer

RECORDS = 400


def numbered_records(path: Path, count: int = RECORDS) -> DataConfig:
    """Text records that say their own index, so a stream can be read back as the set of records it holds."""
    path.write_text("".join(json.dumps({"text": f"record {index}"}) + "\n" for index in range(count)))
    return DataConfig(dataset=str(path), seq_len=16)


def record_indices(packed: PackedData) -> list[int]:
    """The records in a byte-tokenised stream, in order: each is [bos] text [eos]."""
    text = ByteTokenizer().decode([t if t not in (BOS_ID, EOS_ID) else ord("|") for t in packed.tokens.tolist()])
    return [int(document.removeprefix("record ")) for document in text.split("|") if document]


def test_every_record_is_in_exactly_one_stream(tmp_path: Path) -> None:
    config = numbered_records(tmp_path / "data.jsonl")
    splits = build_splits(config, ValidationConfig(split=0.2), ByteTokenizer())
    assert splits.val is not None
    train, val = record_indices(splits.train), record_indices(splits.val)
    assert sorted(train + val) == list(range(RECORDS))
    assert val == [index for index in range(RECORDS) if is_held_out(index, 0.2)]
    assert 0 < len(val) < RECORDS


def test_the_split_is_the_same_on_every_call(tmp_path: Path) -> None:
    config = numbered_records(tmp_path / "data.jsonl")
    first, second = (build_splits(config, ValidationConfig(split=0.1), ByteTokenizer()) for _ in range(2))
    assert first.val is not None and second.val is not None
    assert np.array_equal(first.train.tokens, second.train.tokens)
    assert np.array_equal(first.val.tokens, second.val.tokens)
    assert np.array_equal(first.val.trainable, second.val.trainable)


@pytest.mark.parametrize("fraction", [0.01, 0.1, 0.3])
def test_about_the_fraction_asked_for_is_held_out(fraction: float) -> None:
    count = 20_000
    held = sum(is_held_out(index, fraction) for index in range(count))
    spread = math.sqrt(count * fraction * (1 - fraction))  # each record independently: a binomial count
    assert abs(held - count * fraction) < 5 * spread


def test_no_split_holds_nothing_out(tmp_path: Path) -> None:
    config = numbered_records(tmp_path / "data.jsonl")
    splits = build_splits(config, ValidationConfig(), ByteTokenizer())
    assert splits.val is None
    assert np.array_equal(splits.train.tokens, build_packed_data(config, ByteTokenizer()).tokens)
    assert not any(is_held_out(index, 0.0) for index in range(1000))


def test_a_validation_data_set_validates_whole_and_holds_nothing_out(tmp_path: Path) -> None:
    config = numbered_records(tmp_path / "data.jsonl")
    other = numbered_records(tmp_path / "val.jsonl", count=30)
    splits = build_splits(config, ValidationConfig(dataset=other.dataset), ByteTokenizer())
    assert splits.val is not None
    assert record_indices(splits.train) == list(range(RECORDS))
    assert record_indices(splits.val) == list(range(30))


def test_a_held_out_record_is_a_block_and_a_set_with_nothing_to_predict_is_refused_by_flag(tmp_path: Path) -> None:
    config = numbered_records(tmp_path / "data.jsonl", count=20)
    lowest, next_lowest = sorted(held_out_score(index) for index in range(20))[:2]
    one_record = (lowest + next_lowest) / 2  # holds out one record of 20: about 12 tokens, one padded block
    assert sum(is_held_out(index, one_record) for index in range(20)) == 1
    splits = build_splits(config, ValidationConfig(split=one_record), ByteTokenizer())
    assert splits.val is not None and splits.val.num_samples == 1
    bare = ByteTokenizer()
    bare.bos_id = bare.eos_id = None  # a record of one byte is then one token: nothing to predict
    short = tmp_path / "short.jsonl"
    short.write_text(json.dumps({"text": "h"}) + "\n")
    with pytest.raises(InputError, match=r"--val-dataset .*short.jsonl: no record of 2 tokens or more"):
        build_splits(config, ValidationConfig(dataset=str(short)), bare)


def test_an_entry_without_a_split_keeps_its_key_and_each_side_of_a_split_has_its_own(tmp_path: Path) -> None:
    config, tokenizer = numbered_records(tmp_path / "data.jsonl"), ByteTokenizer()
    plain = cache_key(config, tokenizer)
    assert cache_key(config, tokenizer, 0.0, "val") == plain
    sides = {cache_key(config, tokenizer, fraction, part) for fraction in (0.1, 0.2) for part in ("train", "val")}
    assert len(sides) == 4 and plain not in sides


def test_a_hub_validation_data_set_is_read_and_cached_in_its_own_split() -> None:
    config = DataConfig(dataset="owner/corpus", dataset_split="train")
    val = val_dataset_config(config, ValidationConfig(dataset="owner/corpus", dataset_split="validation"))
    assert dataset_identity(val) == {"dataset": "owner/corpus", "config": None, "split": "validation"}
    tokenizer = ByteTokenizer()
    assert cache_key(val, tokenizer) not in (
        cache_key(config, tokenizer),
        cache_key(replace(val, dataset_split="train"), tokenizer),
    )
    assert val_dataset_config(config, ValidationConfig(dataset="owner/other")).dataset_split == "train"


@pytest.mark.parametrize("validation", [ValidationConfig(split=0.2), ValidationConfig(dataset="val")])
def test_cached_splits_map_what_build_splits_makes(tmp_path: Path, validation: ValidationConfig) -> None:
    """Rank 0 writes the entries, another rank maps them; both streams equal the uncached ones."""
    config, tokenizer = numbered_records(tmp_path / "data.jsonl"), ByteTokenizer()
    if validation.dataset:
        validation = ValidationConfig(dataset=numbered_records(tmp_path / "val.jsonl", count=40).dataset)
    expected = build_splits(config, validation, tokenizer)
    cache = tmp_path / "cache"
    written = cached_splits(config, validation, tokenizer, cache, DistEnv(rank=0, world_size=2), timeout_s=5)
    mapped = cached_splits(config, validation, tokenizer, cache, DistEnv(rank=1, world_size=2), timeout_s=5)
    for splits in (written, mapped):
        assert splits.val is not None and expected.val is not None
        assert isinstance(splits.train.tokens, np.memmap)
        assert np.array_equal(splits.train.tokens, expected.train.tokens)
        assert np.array_equal(splits.train.trainable, expected.train.trainable)
        assert np.array_equal(splits.val.tokens, expected.val.tokens)
        assert np.array_equal(splits.val.trainable, expected.val.trainable)
    assert len([entry for entry in cache.iterdir() if not entry.name.startswith(".")]) == 2
