"""A data set's records as a stream, in batches: nothing holds the whole data set.

    .jsonl   read line by line; the lines go to the tokenising workers raw, which parse them (in parallel)
    .json    one array of objects, parsed an element at a time from a buffer of the file (a record at most, plus
             the read-ahead), never the whole text
    .txt     documents separated by blank lines, split from a buffer as the file is read
    hub id   datasets.load_dataset's Arrow files (memory-mapped from the Hugging Face cache, where the stage step put
             them), read a slice of rows at a time
    s3://    the staged objects (trainer/base/s3/inputs.py), in key order, each read as a local file of its suffix
    synthetic  generated

A record's index is its position in that order (blank lines skipped), counted across all files of a data set: the
held-out split (trainer/data/split.py) is decided by it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from trainer.base.errors import InputError
from trainer.base.flags.config import DataConfig
from trainer.base.s3.inputs import staged_dataset_files
from trainer.base.s3.uri import is_s3_uri
from trainer.data.formats import Record

SYNTHETIC_DOCUMENTS = 4096
SYNTHETIC_SEED = 1234  # the synthetic data set is fixed; --seed changes only the order and the init
# A batch is what one worker tokenises at a time: large enough that the pipe and the pickling cost little per
# record, small enough that a few per worker in flight stay in the tens of MB.
BATCH_RECORDS = 2048
BATCH_BYTES = 1 << 21
READ_CHARS = 1 << 20  # the .json and .txt read-ahead
JSON_WHITESPACE = " \t\n\r"  # RFC 8259 section 2


@dataclass
class RecordBatch:
    """Consecutive records of a data set: raw JSONL lines (parsed by the worker that tokenises them) or records."""

    first_index: int
    """The data set index of the batch's first record."""
    source: str
    """Where the records come from, for messages: the flag and its value (and the file of an s3:// data set)."""
    lines: list[bytes] = field(default_factory=list)
    line_numbers: list[int] = field(default_factory=list)
    """Each raw line's number in its file (1-based), for messages."""
    records: list[Record] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.lines) + len(self.records)

    def parsed(self) -> list[Record]:
        """The batch's records, the raw lines parsed."""
        if not self.lines:
            return self.records
        records = []
        for line, number in zip(self.lines, self.line_numbers, strict=True):
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                raise InputError(f"{self.source}: not valid JSON (line {number}: {error})") from None
            records.append(checked_record(record, self.source))
        return records


def checked_record(record: object, source: str) -> Record:
    if not isinstance(record, dict):
        raise InputError(f"{source}: expected JSON objects, one per record")
    return record


def synthetic_stream(count: int = SYNTHETIC_DOCUMENTS) -> Iterator[Record]:
    """Short arithmetic sentences: learnable, so the loss visibly falls; identical on every machine."""
    rng = random.Random(SYNTHETIC_SEED)
    for _ in range(count):
        facts = []
        for _ in range(rng.randint(2, 6)):
            a, b = rng.randint(0, 20), rng.randint(0, 20)
            facts.append(f"{a} plus {b} is {a + b}." if rng.random() < 0.5 else f"{a} times {b} is {a * b}.")
        yield {"text": " ".join(facts)}


def jsonl_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of every line that holds something; a file object reads a buffer at a time."""
    with path.open("rb") as lines:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                yield number, line


def text_documents(path: Path) -> Iterator[Record]:
    """Documents separated by blank lines ("\\n\\n"), each stripped; the same documents as splitting the whole text
    (leftmost non-overlapping matches of a fixed separator do not depend on where the reads ended, so the part after
    the last separator read is kept and continued)."""
    rest = ""
    with path.open(encoding="utf-8") as text:
        while chunk := text.read(READ_CHARS):
            *documents, rest = (rest + chunk).split("\n\n")
            yield from ({"text": d.strip()} for d in documents if d.strip())
    if rest.strip():
        yield {"text": rest.strip()}


def json_array_records(path: Path, source: str) -> Iterator[Record]:
    """The objects of a JSON array, one at a time: each is decoded from a buffer that holds it and the read-ahead
    (json.JSONDecoder.raw_decode), and the buffer is cut behind it."""
    decoder = json.JSONDecoder()
    with path.open(encoding="utf-8") as text:
        buffer, position, ended = "", 0, False

        def more(at_least: int = READ_CHARS) -> bool:
            nonlocal buffer, position, ended
            chunk = text.read(max(READ_CHARS, at_least))
            buffer, position, ended = buffer[position:] + chunk, 0, not chunk
            return bool(chunk)

        def next_character() -> str:
            """The next character that is not whitespace, not consumed ("" at the end of the file)."""
            nonlocal position
            while True:
                while position < len(buffer) and buffer[position] in JSON_WHITESPACE:
                    position += 1
                if position < len(buffer) or not more():
                    return buffer[position] if position < len(buffer) else ""

        def invalid(reason: str) -> InputError:
            return InputError(f"{source}: not valid JSON ({reason})")

        first = next_character()
        if first != "[":
            if not first:
                raise invalid("an empty file")
            try:  # valid JSON that is not an array is refused for what it is, as a whole-file parse would
                json.loads(buffer[position:] + text.read())
            except json.JSONDecodeError as error:
                raise invalid(str(error)) from None
            raise InputError(f"{source}: expected JSON objects, one per record")
        position += 1
        if next_character() == "]":
            position += 1
        else:
            while True:
                next_character()  # raw_decode takes no leading whitespace
                while True:
                    try:
                        record, position = decoder.raw_decode(buffer, position)
                        break
                    except json.JSONDecodeError as error:
                        # Cut short by the end of the buffer, or really invalid: read on (doubling, so a record
                        # longer than the read-ahead is decoded a few times, not once per read) until the file ends.
                        if ended or not more(2 * (len(buffer) - position)):
                            raise invalid(str(error)) from None
                yield checked_record(record, source)
                separator = next_character()
                position += 1
                if separator == "]":
                    break
                if separator != ",":
                    raise invalid(f"',' or ']' expected after a record, found {separator or 'the end of the file'!r}")
        if next_character():
            raise invalid("text after the array")


def batched(records: Iterable[Record], first_index: int, source: str) -> Iterator[RecordBatch]:
    records = iter(records)
    while chunk := list(islice(records, BATCH_RECORDS)):
        yield RecordBatch(first_index, source, records=chunk)
        first_index += len(chunk)


def jsonl_batches(path: Path, first_index: int, source: str) -> Iterator[RecordBatch]:
    batch = RecordBatch(first_index, source)
    size = 0
    for number, line in jsonl_lines(path):
        batch.lines.append(line)
        batch.line_numbers.append(number)
        size += len(line)
        if len(batch) >= BATCH_RECORDS or size >= BATCH_BYTES:
            yield batch
            batch, size = RecordBatch(batch.first_index + len(batch), source), 0
    if len(batch):
        yield batch


def file_batches(path: Path, first_index: int, source: str) -> Iterator[RecordBatch]:
    """A local file by its suffix: .jsonl, .json, anything else as text."""
    if path.suffix == ".jsonl":
        return jsonl_batches(path, first_index, source)
    if path.suffix == ".json":
        return batched(json_array_records(path, source), first_index, source)
    return batched(text_documents(path), first_index, source)


def hub_records(config: DataConfig) -> Iterator[Record]:
    import datasets  # only for hub data sets

    loaded: Any = datasets.load_dataset(config.dataset, config.dataset_config, split=config.dataset_split)
    for columns in loaded.iter(batch_size=BATCH_RECORDS):  # a slice of the Arrow table at a time: {name: values}
        names = list(columns)
        yield from (dict(zip(names, row, strict=True)) for row in zip(*columns.values(), strict=True))


def record_batches(config: DataConfig, flag: str = "--dataset") -> Iterator[RecordBatch]:
    """The data set `config.dataset` names, in batches, in record order."""
    source = f"{flag} {config.dataset}"
    if config.dataset == "synthetic":
        yield from batched(synthetic_stream(), 0, source)
        return
    if is_s3_uri(config.dataset):  # the objects as staged, in key order, one data set
        first_index = 0
        for path in staged_dataset_files(config.dataset, config.cache_dir):
            for batch in file_batches(path, first_index, f"{source} ({path.name})"):
                first_index += len(batch)
                yield batch
        return
    path = Path(config.dataset).expanduser()
    if path.is_file():
        yield from file_batches(path, 0, source)
        return
    yield from batched(hub_records(config), 0, source)


def stream_records(config: DataConfig, flag: str = "--dataset") -> Iterator[Record]:
    """Every record of the data set, one at a time."""
    for batch in record_batches(config, flag):
        yield from batch.parsed()
