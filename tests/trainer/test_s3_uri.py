"""trainer/base/s3/uri.py: s3:// URIs parsed once, joined without doubled slashes, refused by flag when malformed."""

from __future__ import annotations

import re

import pytest

from trainer.base.errors import InputError
from trainer.base.s3.uri import S3Uri, bucket_name_problem, is_s3_uri


def test_a_uri_parses_into_bucket_and_key_and_prints_back_as_given() -> None:
    for text in ("s3://fsdp-eks-data", "s3://fsdp-eks-data/sets/x.jsonl", "s3://fsdp-eks-data/sets/"):
        assert str(S3Uri.parse(text)) == text
    assert S3Uri.parse("s3://fsdp-eks-data/sets/x.jsonl") == S3Uri("fsdp-eks-data", "sets/x.jsonl")


def test_join_treats_the_uri_as_a_prefix() -> None:
    run = S3Uri.parse("s3://fsdp-eks-artifacts/fsdp-eks/dev/run-1")
    assert (
        str(run.join("checkpoints", "step_00000010/"))
        == "s3://fsdp-eks-artifacts/fsdp-eks/dev/run-1/checkpoints/step_00000010"
    )
    assert str(S3Uri.parse("s3://fsdp-eks-artifacts/").join("model")) == "s3://fsdp-eks-artifacts/model"
    assert run.prefix == "fsdp-eks/dev/run-1/" and S3Uri("b-1").prefix == ""
    assert run.name == "run-1"


@pytest.mark.parametrize(
    "text, why",
    [
        ("/fsx/data.jsonl", "not an s3:// URI"),
        ("s3://ab/x", "not a valid S3 bucket name"),
        ("s3://Data/x", "not a valid S3 bucket name"),
        ("s3://$(BUCKET)/x", "not a valid S3 bucket name"),
        ("s3://fsdp-eks-data//x.jsonl", "empty path segment"),
        ("s3://fsdp-eks-data/a//x.jsonl", "empty path segment"),
    ],
)
def test_a_malformed_uri_is_refused_naming_the_flag_and_the_value(text: str, why: str) -> None:
    with pytest.raises(InputError, match=rf"^--dataset {re.escape(text)}: .*{why}"):
        S3Uri.parse(text, "--dataset")


def test_bucket_names_follow_s3s_rules() -> None:
    assert bucket_name_problem("fsdp-eks-dev-artifacts-20261203") is None
    assert bucket_name_problem("a" * 64) and bucket_name_problem("-bucket") and bucket_name_problem("my..bucket")
    assert is_s3_uri("s3://b-1/x") and not is_s3_uri("https://b-1/x") and not is_s3_uri(None)
