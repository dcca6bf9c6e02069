"""An s3:// data set or model, checked as the job's staging would find it: there, and its records in a format the
trainer reads (told from the first record, read with a ranged GET); and the epochs the job's steps make of it."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace

import pytest

from preflight.aws import AwsClients
from preflight.s3_data import FIRST_READ, first_record, s3_findings
from stack.config import StackConfig
from stack.files import load_stack_config

BUCKET = "acme-data"


def p5_2(dataset: str, **job: object) -> StackConfig:
    config = load_stack_config("p5-2")
    return replace(config, job=replace(config.job, dataset=dataset, **job))


def put(aws: AwsClients, key: str, body: bytes | str) -> None:
    aws.s3.put_object(Bucket=BUCKET, Key=key, Body=body.encode() if isinstance(body, str) else body)


@pytest.fixture
def bucket(aws: AwsClients) -> AwsClients:
    aws.s3.create_bucket(Bucket=BUCKET)
    return aws


def jsonl(records: Sequence[Mapping[str, object]]) -> str:
    return "".join(json.dumps(record) + "\n" for record in records)


INSTRUCTION = {"instruction": "Name the collective.", "input": "", "output": "All-gather."}


@pytest.mark.parametrize(
    ("key", "body", "expected"),
    [
        ("train.jsonl", jsonl([INSTRUCTION] * 3), "instruction"),
        ("train.json", json.dumps([{"dialogue": "#Person1#: Hi.", "summary": "A greeting."}]), "dialogsum"),
        ("train.txt", "First document.\n\nSecond document.\n", "text"),
        ("chat.jsonl", jsonl([{"messages": [{"role": "user", "content": "Hi"}]}]), "chat"),
    ],
)
def test_the_data_sets_format_is_told_from_its_first_record(
    bucket: AwsClients, key: str, body: str, expected: str
) -> None:
    put(bucket, key, body)
    finding = s3_findings(p5_2(f"s3://{BUCKET}/{key}"), bucket.s3)[0]  # then: many epochs of so small a set
    assert finding.level == "ok" and finding.what.endswith(f"{expected} records"), finding


def test_a_prefix_is_read_as_staging_reads_it(bucket: AwsClients) -> None:
    put(bucket, "parts/b.jsonl", jsonl([INSTRUCTION]))
    put(bucket, "parts/a.jsonl", jsonl([INSTRUCTION]))
    put(bucket, "parts/README.md", "not data")
    finding = s3_findings(p5_2(f"s3://{BUCKET}/parts/"), bucket.s3)[0]
    assert finding.level == "ok" and "2 object(s)" in finding.what


def test_a_missing_object_is_a_problem_in_s3s_words(bucket: AwsClients) -> None:
    (finding,) = s3_findings(p5_2(f"s3://{BUCKET}/train.jsonl"), bucket.s3)
    assert finding.level == "problem" and f"s3://{BUCKET}/train.jsonl: NoSuchKey" in finding.what


def test_a_missing_bucket_is_a_problem_in_s3s_words(aws: AwsClients) -> None:
    (finding,) = s3_findings(p5_2("s3://no-such-bucket-here/train.jsonl"), aws.s3)
    assert finding.level == "problem" and "NoSuchBucket" in finding.what


def test_a_prefix_without_data_is_a_problem(bucket: AwsClients) -> None:
    put(bucket, "parts/README.md", "not data")
    (finding,) = s3_findings(p5_2(f"s3://{BUCKET}/parts/"), bucket.s3)
    assert finding.level == "problem" and "no .jsonl, .json, .txt object under this prefix" in finding.what


def test_records_of_no_known_format_are_a_problem_naming_their_fields(bucket: AwsClients) -> None:
    put(bucket, "train.jsonl", jsonl([{"question": "q", "answer": "a"}]))
    (finding,) = s3_findings(p5_2(f"s3://{BUCKET}/train.jsonl"), bucket.s3)
    assert finding.level == "problem" and "['answer', 'question']" in finding.what
    assert "docs/data.md" in finding.fix


def test_a_set_format_the_records_lack_is_a_problem(bucket: AwsClients) -> None:
    put(bucket, "train.jsonl", jsonl([INSTRUCTION]))
    (finding,) = s3_findings(p5_2(f"s3://{BUCKET}/train.jsonl", dataset_format="dialogsum"), bucket.s3)
    assert finding.level == "problem" and "--dataset-format dialogsum: a record has no field 'dialogue'" in finding.what


def test_a_first_record_longer_than_the_first_read_is_read_whole(bucket: AwsClients) -> None:
    long = {**INSTRUCTION, "output": "x" * (FIRST_READ * 2)}
    put(bucket, "train.jsonl", jsonl([long, INSTRUCTION]))
    finding = s3_findings(p5_2(f"s3://{BUCKET}/train.jsonl"), bucket.s3)[0]
    assert finding.level == "ok" and finding.what.endswith("instruction records")


def test_a_cut_line_is_not_a_record_until_the_object_ends() -> None:
    line = json.dumps(INSTRUCTION).encode()
    assert first_record(line[:20], ".jsonl", whole=False) is None
    assert first_record(line, ".jsonl", whole=True) == INSTRUCTION


def test_many_epochs_of_a_small_data_set_are_warned_about_with_fewer_steps(bucket: AwsClients) -> None:
    """p5-2's 1000 steps of 128 sequences of 4096 tokens over a 4 MB file: about a million tokens, some 250
    sequences, so about 500 epochs."""
    record = jsonl([INSTRUCTION])
    put(bucket, "train.jsonl", record * (4_000_000 // len(record)))
    findings = s3_findings(p5_2(f"s3://{BUCKET}/train.jsonl"), bucket.s3)
    assert [f.level for f in findings] == ["ok", "warning"]
    assert "1000 steps of 128 sequences are about 5" in findings[1].what and "modelled" in findings[1].what
    assert findings[1].fix.startswith("pulumi config set --path fsdp-eks:job.steps 4 ")


def test_a_few_epochs_are_not_warned_about(bucket: AwsClients) -> None:
    record = jsonl([INSTRUCTION])
    put(bucket, "train.jsonl", record * (4_000_000 // len(record)))
    findings = s3_findings(p5_2(f"s3://{BUCKET}/train.jsonl", steps=4), bucket.s3)
    assert [f.level for f in findings] == ["ok"]


def test_an_s3_model_needs_its_config_json(bucket: AwsClients) -> None:
    put(bucket, "models/llama/model.safetensors", b"weights")
    config = replace(p5_2("knkarthick/dialogsum"), job=replace(p5_2("x").job, model=f"s3://{BUCKET}/models/llama/"))
    (finding,) = s3_findings(config, bucket.s3)
    assert finding.level == "problem" and "no config.json under this prefix" in finding.what
    put(bucket, "models/llama/config.json", "{}")
    (finding,) = s3_findings(config, bucket.s3)
    assert finding.level == "ok" and "2 files, config.json among them" in finding.what
