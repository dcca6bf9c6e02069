"""Training data: the packed stream built (streamed through trainer/data/prepare.py), and the samples ordered.

Determinism contract (tests/trainer/test_data.py):
- All records are tokenised into one stream, each record's length kept, and laid out apart in blocks of `seq_len`
  positions (trainer/data/blocks.py): a sample is a block of whole records, positions restarting at each, and each
  record attends only to itself (trainer/model/attention.py). Prompt tokens of instruction and dialogue records are
  masked out of the loss, so only responses are learnt; chat records (`messages`) go through the tokenizer's own
  chat template, and only the assistant's turns are learnt (trainer/data/tokenizer.py chat_pieces).
- Sample order: a permutation of all samples seeded by (--seed, epoch), independent of the world size.
- The global batch of step k is samples [k*G, (k+1)*G) of that order, whatever the world size; each
  data-parallel rank takes its own rows of it. The data position is the number of samples consumed, so a
  resumed run continues at the exact sample.
Numpy only: the training loop turns the arrays into tensors.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from trainer.base.errors import InputError
from trainer.base.flags.config import DataConfig, ValidationConfig
from trainer.data.epochs import MANY_EPOCHS, epochs, epochs_warning
from trainer.data.formats import DIALOGUE_PROMPT, INSTRUCTION_PROMPT, detect_format, render
from trainer.data.packed import IGNORE_INDEX, PackedData, Sample, require_records, stack
from trainer.data.prepare import InMemory, prepare
from trainer.data.records import SYNTHETIC_DOCUMENTS, file_batches, stream_records, synthetic_stream
from trainer.data.split import Splits
from trainer.data.tokenizer import Tokenizer

__all__ = [
    "DIALOGUE_PROMPT",
    "IGNORE_INDEX",
    "INSTRUCTION_PROMPT",
    "MANY_EPOCHS",
    "PackedData",
    "Sample",
    "detect_format",
    "epochs",
    "epochs_warning",
    "render",
]


def synthetic_records(count: int = SYNTHETIC_DOCUMENTS) -> list[dict[str, str]]:
    """The synthetic data set's records (trainer/data/records.py synthetic_stream), as a list."""
    return [{"text": str(record["text"])} for record in synthetic_stream(count)]


def read_local_records(path: Path) -> list[dict[str, Any]]:
    """A .jsonl file (one object per line), a .json file (a list of objects), or a .txt file (documents
    separated by blank lines), all read into a list: for small files and tests; preparation streams them."""
    return [record for batch in file_batches(path, 0, f"--dataset {path}") for record in batch.parsed()]


def load_records(config: DataConfig) -> list[dict[str, Any]]:
    """Every record of the data set, in a list (trainer/data/records.py streams them)."""
    return list(stream_records(config))


def pack(records: Iterable[dict[str, Any]], tokenizer: Tokenizer, data_format: str, seq_len: int) -> PackedData:
    """Tokenise each record as [bos] prompt response [eos] (a chat record: as its template writes it) and
    concatenate them all, a record at a time: the reference that the batched, streaming preparation
    (trainer/data/tokenise.py) equals token for token."""
    ids: list[int] = []
    trainable: list[bool] = []
    lengths: list[int] = []
    for record in records:
        if data_format == "chat":
            if "messages" not in record:
                raise InputError(f"--dataset-format chat: a record has no field 'messages' ({sorted(record)})")
            chat_ids, chat_trainable = tokenizer.encode_chat(record["messages"])
            ids += chat_ids
            trainable += chat_trainable
            lengths.append(len(chat_ids))
            continue
        prompt, response = render(record, data_format)
        prefix = ([tokenizer.bos_id] if tokenizer.bos_id is not None else []) + tokenizer.encode(prompt)
        answer = tokenizer.encode(response) + ([tokenizer.eos_id] if tokenizer.eos_id is not None else [])
        ids += prefix + answer
        trainable += [False] * len(prefix) + [True] * len(answer)
        lengths.append(len(prefix) + len(answer))
    return PackedData(
        np.asarray(ids, dtype=np.int64), np.asarray(trainable, dtype=bool), seq_len, np.asarray(lengths, np.int64)
    )


def check_enough(packed: PackedData, what: str) -> PackedData:
    require_records(packed.record_lengths, packed.seq_len, what)
    return packed


def build_packed_data(config: DataConfig, tokenizer: Tokenizer, flag: str = "--dataset") -> PackedData:
    """The data set tokenised into memory (every rank for itself, without --data-cache-dir)."""
    stream = InMemory()
    prepare(config, tokenizer, stream, flag=flag)
    return check_enough(stream.packed(config.seq_len), f"{flag} {config.dataset}")


def val_dataset_config(config: DataConfig, validation: ValidationConfig) -> DataConfig:
    """--val-dataset read as --dataset would be (same format, tokenizer and hub config), in --val-dataset-split if
    given. The cache key and the staging marker take their identity from this, the split with it."""
    assert validation.dataset is not None
    return replace(config, dataset=validation.dataset, dataset_split=validation.split_read(config.dataset_split))


def stream_names(config: DataConfig, validation: ValidationConfig) -> tuple[str, str]:
    """How a refusal names the training and the validation stream: by the flags that made them."""
    if validation.dataset:
        return f"--dataset {config.dataset}", f"--val-dataset {validation.dataset}"
    if validation.split > 0:
        held = f"--val-split {validation.split:g} of --dataset {config.dataset}"
        return f"--dataset {config.dataset} less its {held}", held
    return f"--dataset {config.dataset}", "no validation stream"


def build_splits(config: DataConfig, validation: ValidationConfig, tokenizer: Tokenizer) -> Splits:
    """Training and validation streams. --val-dataset: all of --dataset trains and that data set validates.
    --val-split: the records is_held_out picks (by index, before tokenising) validate, the others train, so no
    record is in both. Neither: no validation stream."""
    if validation.dataset:
        val = build_packed_data(val_dataset_config(config, validation), tokenizer, "--val-dataset")
        return Splits(build_packed_data(config, tokenizer), val)
    if validation.split <= 0:
        return Splits(build_packed_data(config, tokenizer), None)
    train, val = InMemory(), InMemory()
    prepare(config, tokenizer, train, val, validation.split)
    train_name, val_name = stream_names(config, validation)
    return Splits(
        check_enough(train.packed(config.seq_len), train_name), check_enough(val.packed(config.seq_len), val_name)
    )


class SampleOrder:
    """Which sample comes at each position of training: a fresh seeded permutation per epoch."""

    def __init__(self, num_samples: int, seed: int) -> None:
        self.num_samples = num_samples
        self.seed = seed
        self._cache: dict[int, np.ndarray] = {}

    def _permutation(self, epoch: int) -> np.ndarray:
        if epoch not in self._cache:
            self._cache = {epoch: np.random.default_rng([self.seed, epoch]).permutation(self.num_samples)}
        return self._cache[epoch]

    def indices(self, start: int, count: int) -> np.ndarray:
        """Sample ids at positions [start, start + count) of the endless order."""
        positions = np.arange(start, start + count)
        return np.array([self._permutation(int(p // self.num_samples))[p % self.num_samples] for p in positions])


@dataclass
class StepBatch:
    """What one rank trains on in one optimizer step."""

    micro_batches: list[Sample]
    """Inputs, labels and positions, each [batch_size, seq_len], one per gradient accumulation step."""
    global_target_tokens: int
    """Tokens counted in the loss over the whole global batch (all ranks): the loss's denominator."""


def step_batch(
    data: PackedData, order: SampleOrder, consumed: int, global_batch: int, batch_size: int, dp_rank: int, dp_size: int
) -> StepBatch:
    """The rank's rows of the global batch that starts at sample position `consumed`.

    Micro step m on rank r takes global rows [(m*dp + r)*b, (m*dp + r + 1)*b): every row is used once per step.
    """
    ids = order.indices(consumed, global_batch)
    samples = [data.sample(int(i)) for i in ids]
    target_tokens = int(sum((sample.labels != IGNORE_INDEX).sum() for sample in samples))
    micro = []
    for m in range(global_batch // (batch_size * dp_size)):
        start = (m * dp_size + dp_rank) * batch_size
        micro.append(stack(samples[start : start + batch_size]))
    return StepBatch(micro, target_tokens)
