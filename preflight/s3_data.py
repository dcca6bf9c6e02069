"""Whether an s3:// data set or model is there, which record format the data set's first record is in, and how many
epochs `job.steps` make of it.

The objects are chosen as the job's staging chooses them (trainer/base/s3/inputs.py dataset_objects, model_objects), and
the format told by the trainer's own detection (trainer/data/formats.py), from the first record of the first object,
read with a ranged GET. A missing input ends the job at staging with exit 4 (docs/job.md, "s3:// inputs"), after
the nodes are up.
"""

from __future__ import annotations

import json
import math
from pathlib import PurePosixPath

from preflight.aws import Client, aws_errors, error_text
from preflight.findings import Finding, ok, problem, warning
from stack.config import StackConfig
from stack.fields import NAMESPACE
from trainer.base.errors import InputError
from trainer.base.s3.inputs import dataset_objects, model_objects
from trainer.base.s3.transfer import S3Error, S3Object
from trainer.base.s3.uri import S3Uri, is_s3_uri
from trainer.data.epochs import MANY_EPOCHS, epochs
from trainer.data.formats import Record, detect_format, render

DATA_CHECK = "data set"
MODEL_CHECK = "model"
# The first read of an object, then the most read to find its first whole record.
FIRST_READ = 1 << 16
LONGEST_RECORD = 1 << 22
# Modelled, not measured: English text averages about 4 bytes per token with Llama's and similar BPE tokenizers, and
# a data set's JSON field names and quotes add bytes but no trained tokens, so this overestimates the tokens a little
# and the epochs come out low rather than high.
BYTES_PER_TOKEN = 4
FEW_EPOCHS = 2  # what the suggested job.steps aims at: Llama 2's fine-tuning ran 2 (Touvron et al. 2023, 3.1)


def first_record(head: bytes, suffix: str, whole: bool) -> Record | None:
    """The first record of an object that starts with `head` (`whole`: the object itself): a .jsonl file's first
    line, a .json array's first element, a .txt file's first document (its first blank-line-separated block); None
    when `head` may end before the record does. InputError for what the trainer would refuse."""
    text = head.decode("utf-8", errors="ignore")
    if suffix == ".txt":
        return {"text": text.split("\n\n", 1)[0]}
    if suffix == ".jsonl":
        line = next((line for line in text.splitlines(keepends=True) if line.strip()), None)
        if line is None or not (line.endswith("\n") or whole):
            return None
        return checked(json.loads(line))
    start = text.lstrip()
    if not start.startswith("["):
        raise InputError("expected a .json file to hold one array of objects")
    try:
        record, _ = json.JSONDecoder().raw_decode(start[1:].lstrip())
    except json.JSONDecodeError:
        return None
    return checked(record)


def checked(record: object) -> Record:
    if not isinstance(record, dict):
        raise InputError(f"expected JSON objects, one per record, not {type(record).__name__}")
    return record


def read_first_record(s3: Client, uri: S3Uri, size: int) -> Record:
    """The object's first record, read in growing ranges."""
    length = FIRST_READ
    while True:
        head = s3.get_object(Bucket=uri.bucket, Key=uri.key, Range=f"bytes=0-{length - 1}")["Body"].read()
        try:
            record = first_record(head, PurePosixPath(uri.key).suffix, whole=length >= size)
        except json.JSONDecodeError as error:
            raise InputError(f"{uri}: not valid JSON ({error.msg})") from None
        if record is not None:
            return record
        if length >= min(size, LONGEST_RECORD):
            raise InputError(f"{uri}: no whole record in its first {min(size, LONGEST_RECORD):,} bytes")
        length *= 4


def record_format(record: Record, data_format: str) -> str:
    """The format the trainer reads `record` in: `data_format`, or the detected one for auto; InputError when the
    record lacks the format's fields."""
    chosen = detect_format(record) if data_format == "auto" else data_format
    if chosen != "chat":  # a chat record is rendered by the tokenizer's template, which the job's staging checks
        render(record, chosen)
    return chosen


def global_batch(config: StackConfig) -> int:
    return config.job.global_batch_size or config.job.batch_size * config.total_gpus


def epochs_finding(config: StackConfig, uri: str, objects: list[S3Object]) -> Finding | None:
    """A warning when `job.steps` make more than MANY_EPOCHS passes over the data set, its tokens estimated from its
    bytes."""
    total = sum(item.size for item in objects)
    sequences = max(1, total // BYTES_PER_TOKEN // config.job.seq_len)
    batch, steps = global_batch(config), config.job.steps
    passes = epochs(steps, batch, sequences)
    if passes <= MANY_EPOCHS:
        return None
    few = max(1, math.ceil(FEW_EPOCHS * sequences / batch))
    return warning(
        DATA_CHECK,
        f"{steps} steps of {batch} sequences are about {passes:.0f} epochs of {uri} ({total:,} bytes, about "
        f"{sequences:,} sequences of {config.job.seq_len} tokens at {BYTES_PER_TOKEN} bytes per token, modelled; the "
        "trainer's start log gives the exact figure)",
        f"pulumi config set --path {NAMESPACE}:job.steps {few}   # about {FEW_EPOCHS} epochs (docs/data.md)",
    )


def dataset_findings(config: StackConfig, key: str, value: str, s3: Client) -> list[Finding]:
    """The s3:// data set at `key` (job.dataset or job.validation.dataset): there, readable, in a format the trainer
    reads; for job.dataset, the epochs its steps make."""
    uri = S3Uri.parse(value, key)
    try:
        objects = dataset_objects(uri, s3)
        first = S3Uri(uri.bucket, objects[0].key)
        found = record_format(read_first_record(s3, first, objects[0].size), config.job.dataset_format)
    except S3Error as error:
        return [problem(DATA_CHECK, f"{key}: {error}", "upload it, or fix the URI")]
    except aws_errors() as error:
        return [problem(DATA_CHECK, f"{key} {value}: {error_text(error)}", "upload it, or fix the URI")]
    except InputError as error:
        return [
            problem(
                DATA_CHECK,
                f"{key}: {error}",
                "records in one of the formats of docs/data.md, or job.datasetFormat set to theirs",
            )
        ]
    size = sum(item.size for item in objects)
    findings = [ok(DATA_CHECK, f"{key} {value}: {len(objects)} object(s), {size:,} bytes, {found} records")]
    if key == "job.dataset" and (many := epochs_finding(config, value, objects)):
        findings.append(many)
    return findings


def model_findings(value: str, s3: Client) -> list[Finding]:
    """An s3:// job.model: a directory in Hugging Face format, config.json among its files."""
    try:
        files = model_objects(S3Uri.parse(value, "job.model"), s3)
    except S3Error as error:
        return [problem(MODEL_CHECK, f"job.model: {error}", "upload the model, or fix the URI")]
    except aws_errors() as error:
        return [problem(MODEL_CHECK, f"job.model {value}: {error_text(error)}", "upload the model, or fix the URI")]
    except InputError as error:
        return [problem(MODEL_CHECK, str(error), "upload the model's config.json, *.safetensors and tokenizer there")]
    return [ok(MODEL_CHECK, f"job.model {value}: {len(files)} files, config.json among them")]


def s3_findings(config: StackConfig, s3: Client) -> list[Finding]:
    """Every s3:// input of the job: its data set, its held-out data set, its model."""
    job, findings = config.job, []
    for key, value in (("job.dataset", job.dataset), ("job.validation.dataset", job.validation.dataset)):
        if value is not None and is_s3_uri(value):
            findings += dataset_findings(config, key, value, s3)
    if is_s3_uri(job.model):
        findings += model_findings(job.model, s3)
    return findings
