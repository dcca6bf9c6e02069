"""Data and model in from S3, the final model out to S3 (trainer/base/s3/inputs.py, trainer/base/s3/model_upload.py),
against a real S3 API: moto's server on 127.0.0.1 (local/s3.py), reached through AWS_ENDPOINT_URL as the pods reach AWS.

Staging (`python -m trainer.stage`, which the launcher runs before torchrun) downloads an s3:// data set or model once
into --data-cache-dir; the workers read the staged copy. Bad input ends staging once, with exit 4 and a last line
naming the s3:// URI and AWS's error.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from local.etcd import free_port
from local.s3 import LocalS3
from tests.harness.moto_iam import guarded_s3
from tests.harness.trainer_runs import ROOT, TINY, run_trainer, trainer_env, with_flags
from tests.trainer.test_data import CHAT, chat_tokenizer
from tests.trainer.test_staging import DIALOGUES
from trainer.base.pod.exits import EXIT_STAGING_FAILED, REASON_PREFIX
from trainer.base.s3.inputs import FILES, MANIFEST, staged_directory
from trainer.base.s3.transfer import WAIT_VARIABLE
from trainer.base.s3.uri import S3Uri

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
DATA_BUCKET = "fsdp-eks-data"
MODEL_BUCKET = "fsdp-eks-models"
ARTIFACTS_BUCKET = "fsdp-eks-artifacts"
RECORDS = DIALOGUES  # the staging tests' dialogue records


def jsonl(records: Sequence[Mapping[str, object]]) -> str:
    return "".join(json.dumps(record) + "\n" for record in records)


@pytest.fixture(scope="module")
def s3() -> Iterator[LocalS3]:
    with LocalS3.start() as server:
        for bucket in (DATA_BUCKET, MODEL_BUCKET, ARTIFACTS_BUCKET):
            server.create_bucket(bucket)
        yield server


def put(s3: LocalS3, uri: str, body: str | bytes) -> None:
    target = S3Uri.parse(uri)
    s3.client().put_object(Bucket=target.bucket, Key=target.key, Body=body)


def s3_env(s3: LocalS3) -> dict[str, str]:
    """What the pod gives its processes to reach S3 (here the local API), and no wait for a fresh grant."""
    return {**trainer_env(), **s3.client_environment(), WAIT_VARIABLE: "0"}


def stage(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainer.stage", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def data_args(dataset: str, cache: Path) -> list[str]:
    return with_flags(TINY, tokenizer="byte", dataset=dataset, data_cache_dir=str(cache), steps="2")


def tokens(cache: Path) -> np.ndarray:
    """The one tokenised entry in a data cache."""
    (entry,) = [path.parent for path in cache.glob("*/tokens.npy")]
    return np.load(entry / "tokens.npy")


def last_line(result: subprocess.CompletedProcess[str]) -> str:
    return result.stderr.strip().splitlines()[-1]


def test_a_data_set_in_an_s3_object_is_staged_once_with_the_tokens_of_the_same_file(
    s3: LocalS3, tmp_path: Path
) -> None:
    local = tmp_path / "dialogues.jsonl"
    local.write_text(jsonl(RECORDS))
    put(s3, f"s3://{DATA_BUCKET}/sets/dialogues.jsonl", local.read_bytes())
    assert stage(data_args(str(local), tmp_path / "local"), s3_env(s3)).returncode == 0

    args = data_args(f"s3://{DATA_BUCKET}/sets/dialogues.jsonl", tmp_path / "cache")
    staged = stage(args, s3_env(s3))
    assert staged.returncode == 0, staged.stderr
    assert np.array_equal(tokens(tmp_path / "cache"), tokens(tmp_path / "local"))
    copy = staged_directory(tmp_path / "cache", S3Uri.parse(f"s3://{DATA_BUCKET}/sets/dialogues.jsonl"))
    downloaded = (copy / FILES / "dialogues.jsonl").stat().st_mtime_ns

    again = stage(args, s3_env(s3))  # another pod's launcher, or a restart
    assert again.returncode == 0 and "already staged" in again.stderr
    assert (copy / FILES / "dialogues.jsonl").stat().st_mtime_ns == downloaded  # not downloaded twice


def test_a_data_set_under_an_s3_prefix_is_its_objects_in_key_order(s3: LocalS3, tmp_path: Path) -> None:
    local = tmp_path / "all.jsonl"
    local.write_text(jsonl(RECORDS))
    put(s3, f"s3://{DATA_BUCKET}/parts/b/2.jsonl", jsonl(RECORDS[150:]))
    put(s3, f"s3://{DATA_BUCKET}/parts/a.jsonl", jsonl(RECORDS[:150]))
    put(s3, f"s3://{DATA_BUCKET}/parts/README.md", "not data")
    assert stage(data_args(str(local), tmp_path / "local"), s3_env(s3)).returncode == 0

    staged = stage(data_args(f"s3://{DATA_BUCKET}/parts/", tmp_path / "cache"), s3_env(s3))
    assert staged.returncode == 0, staged.stderr
    assert np.array_equal(tokens(tmp_path / "cache"), tokens(tmp_path / "local"))


def test_a_changed_object_is_staged_and_tokenised_again(s3: LocalS3, tmp_path: Path) -> None:
    uri = f"s3://{DATA_BUCKET}/changing/dialogues.jsonl"
    args = data_args(uri, tmp_path / "cache")
    put(s3, uri, jsonl(RECORDS[:100]))
    assert stage(args, s3_env(s3)).returncode == 0
    first = tokens(tmp_path / "cache")

    put(s3, uri, jsonl(RECORDS))
    again = stage(args, s3_env(s3))
    assert again.returncode == 0 and "already staged" not in again.stderr
    manifest = json.loads((staged_directory(tmp_path / "cache", S3Uri.parse(uri)) / MANIFEST).read_text())
    assert manifest["objects"][0]["size"] == len(jsonl(RECORDS))
    entries = sorted(tmp_path.glob("cache/*/tokens.npy"))
    assert len(entries) == 2 and len(first) < max(len(np.load(path)) for path in entries)


def tiny_model(directory: Path) -> None:
    """A Llama model of the tiny preset's size in Hugging Face format, as a user keeps one in S3."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(123)
    config = LlamaConfig(
        vocab_size=300, hidden_size=48, intermediate_size=136, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128,
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(directory)


def upload(s3: LocalS3, directory: Path, prefix: str) -> None:
    for path in directory.iterdir():
        put(s3, f"{prefix}{path.name}", path.read_bytes())


def keys(s3: LocalS3, prefix: str) -> list[str]:
    uri = S3Uri.parse(prefix)
    answer: dict[str, Any] = s3.client().list_objects_v2(Bucket=uri.bucket, Prefix=uri.key)
    return [item["Key"] for item in answer.get("Contents", [])]


def test_a_model_from_s3_trains_and_the_final_model_lands_in_s3(s3: LocalS3, tmp_path: Path) -> None:
    """Staged once, the model trains in two workers that never call S3 for it; the export is uploaded by rank 0 and
    every rank leaves after it, so the job's end means the model is in S3."""
    tiny_model(tmp_path / "model")
    upload(s3, tmp_path / "model", f"s3://{MODEL_BUCKET}/tiny/")
    (tmp_path / "data.jsonl").write_text(jsonl(RECORDS))
    args = with_flags(
        TINY, model=f"s3://{MODEL_BUCKET}/tiny/", tokenizer="byte", dataset=str(tmp_path / "data.jsonl"),
        data_cache_dir=str(tmp_path / "cache"), steps="2", artifacts_uri=f"s3://{ARTIFACTS_BUCKET}/runs/dev/run-1",
        checkpoint_dir=str(tmp_path / "checkpoints"),
    )  # fmt: skip
    staged = stage(args, s3_env(s3))
    assert staged.returncode == 0, staged.stderr

    workers = {**s3.client_environment(), WAIT_VARIABLE: "0"}
    run = run_trainer(args, tmp_path, nproc=2, env=workers)
    assert run.returncode == 0, run.output
    assert sorted(run.losses()) == [1, 2]
    assert f"model in s3://{ARTIFACTS_BUCKET}/runs/dev/run-1/model/" in run.output
    assert sorted(keys(s3, f"s3://{ARTIFACTS_BUCKET}/runs/dev/run-1/model/")) == [
        "runs/dev/run-1/model/config.json",
        "runs/dev/run-1/model/export-manifest.json",
        "runs/dev/run-1/model/generation_config.json",
        "runs/dev/run-1/model/model.safetensors",
    ]


def test_an_s3_model_brings_its_own_tokenizer_and_chat_template(s3: LocalS3, tmp_path: Path) -> None:
    """Without --tokenizer the model's own is used: staged with the weights, its chat template too, and the data set
    tokenised with it."""
    tiny_model(tmp_path / "model")
    chat_tokenizer(tmp_path / "model")
    upload(s3, tmp_path / "model", f"s3://{MODEL_BUCKET}/chat/")
    put(s3, f"s3://{DATA_BUCKET}/chat.jsonl", jsonl([CHAT] * 50))
    args = with_flags(
        TINY, model=f"s3://{MODEL_BUCKET}/chat/", dataset=f"s3://{DATA_BUCKET}/chat.jsonl", dataset_format="chat",
        seq_len="8", data_cache_dir=str(tmp_path / "cache"),
    )  # fmt: skip
    staged = stage(args, s3_env(s3))
    assert staged.returncode == 0, staged.stderr
    files = staged_directory(tmp_path / "cache", S3Uri.parse(f"s3://{MODEL_BUCKET}/chat/")) / FILES
    assert {path.name for path in files.iterdir()} == {path.name for path in (tmp_path / "model").iterdir()}
    assert len(tokens(tmp_path / "cache")) > 50


def test_the_workers_refuse_an_s3_model_that_was_not_staged(s3: LocalS3, tmp_path: Path) -> None:
    args = with_flags(TINY, model=f"s3://{MODEL_BUCKET}/tiny/", tokenizer="byte", data_cache_dir=str(tmp_path))
    run = run_trainer(args, tmp_path, nproc=1, env={**s3.client_environment(), WAIT_VARIABLE: "0"})
    assert run.returncode == 2
    assert f"--model s3://{MODEL_BUCKET}/tiny/: not staged in --data-cache-dir {tmp_path}" in run.output


def test_a_missing_artifacts_bucket_fails_the_run_before_any_step_naming_the_uri_and_the_aws_error(
    s3: LocalS3, tmp_path: Path
) -> None:
    """The durable tier is read at start (a checkpoint to resume from), so a bucket that is not there ends the run as
    bad input before any training, not after it at the model's upload."""
    args = with_flags(
        TINY, steps="1", warmup_steps="0", artifacts_uri="s3://no-such-artifacts/run-1",
        checkpoint_dir=str(tmp_path / "checkpoints"),
    )  # fmt: skip
    run = run_trainer(args, tmp_path, nproc=1, env={**s3.client_environment(), WAIT_VARIABLE: "0"})
    assert run.returncode == 2, run.output
    assert "s3://no-such-artifacts/run-1/checkpoints/: NoSuchBucket: The specified bucket does not exist" in run.output
    assert run.losses() == {}


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (
            {"dataset": "s3://no-such-data/dialogues.jsonl"},
            "s3://no-such-data/dialogues.jsonl: NoSuchBucket: The specified bucket does not exist",
        ),
        (
            {"dataset": f"s3://{DATA_BUCKET}/missing.jsonl"},
            f"s3://{DATA_BUCKET}/missing.jsonl: NoSuchKey: The specified key does not exist.",
        ),
        (
            {"dataset": f"s3://{DATA_BUCKET}/empty/"},
            f"--dataset s3://{DATA_BUCKET}/empty/: no .jsonl, .json, .txt object under this prefix",
        ),
        (
            {"model": f"s3://{MODEL_BUCKET}/missing/"},
            f"s3://{MODEL_BUCKET}/missing/config.json: NoSuchKey: The specified key does not exist.",
        ),
        (
            {"model": "s3://no-such-models/tiny/"},
            "s3://no-such-models/tiny/config.json: NoSuchBucket: The specified bucket does not exist",
        ),
    ],
)
def test_staging_bad_s3_input_fails_once_naming_the_uri_and_the_aws_error(
    s3: LocalS3, tmp_path: Path, flags: dict[str, str], said: str
) -> None:
    result = stage(with_flags(TINY, tokenizer="byte", data_cache_dir=str(tmp_path), **flags), s3_env(s3))
    assert result.returncode == EXIT_STAGING_FAILED, result.stderr
    assert last_line(result) == f"python -m trainer.stage: error: {said}"
    assert "retry" not in result.stderr


def test_an_unreachable_s3_endpoint_fails_staging_once_naming_the_uri(s3: LocalS3, tmp_path: Path) -> None:
    env = {**s3_env(s3), "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}", "AWS_MAX_ATTEMPTS": "1"}
    result = stage(data_args(f"s3://{DATA_BUCKET}/sets/dialogues.jsonl", tmp_path), env)
    assert result.returncode == EXIT_STAGING_FAILED, result.stderr
    assert last_line(result).startswith(
        f"python -m trainer.stage: error: s3://{DATA_BUCKET}/sets/dialogues.jsonl: EndpointConnectionError: "
    )


def test_the_launcher_ends_the_pod_on_a_missing_bucket_before_any_rendezvous(s3: LocalS3, tmp_path: Path) -> None:
    launch = ["--standalone", "--nnodes=1", "--nproc-per-node=1", "--max-restarts=2"]
    trainer = data_args("s3://no-such-data/dialogues.jsonl", tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "trainer.launch", "--stage-inputs", *launch, "-m", "trainer", *trainer],
        cwd=ROOT,
        env=s3_env(s3),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == EXIT_STAGING_FAILED, result.stderr
    assert last_line(result).startswith(f"{REASON_PREFIX}exit 4 (staging failed), permanent")
    assert "s3://no-such-data/dialogues.jsonl: NoSuchBucket: The specified bucket does not exist" in last_line(result)
    assert result.stderr.count("NoSuchBucket") == 2  # staging's line and the launcher's reason: once
    assert "rendezvous" not in result.stderr.lower()


@pytest.fixture
def guarded() -> Iterator[tuple[LocalS3, dict[str, str], Callable[[], None]]]:
    """moto with IAM checks on (tests/harness/moto_iam.py): a data set in it, the keys of a user who may read nothing,
    and a way to grant that user the read (as IAM does, later)."""
    with guarded_s3() as s3:
        s3.s3.create_bucket(Bucket=DATA_BUCKET)
        s3.s3.put_object(Bucket=DATA_BUCKET, Key="private.jsonl", Body=jsonl(RECORDS).encode())
        outsider = s3.user("outsider", [])
        yield s3.server, outsider, lambda: s3.grant("outsider", ["s3:GetObject", "s3:ListBucket"])


def test_a_denied_read_fails_staging_once_naming_the_uri_and_the_aws_error(
    guarded: tuple[LocalS3, dict[str, str], Callable[[], None]], tmp_path: Path
) -> None:
    server, outsider, _ = guarded
    result = stage(data_args(f"s3://{DATA_BUCKET}/private.jsonl", tmp_path), {**s3_env(server), **outsider})
    assert result.returncode == EXIT_STAGING_FAILED, result.stderr
    assert last_line(result).startswith(
        f"python -m trainer.stage: error: s3://{DATA_BUCKET}/private.jsonl: AccessDenied: "
    )


def test_staging_waits_for_a_grant_that_takes_effect_after_the_pod_starts(
    guarded: tuple[LocalS3, dict[str, str], Callable[[], None]], tmp_path: Path
) -> None:
    """The stack creates the pod's role and its Pod Identity association just before the job; until IAM has caught
    up the read is denied. Staging retries (trainer/base/pod/aws_retry.py), then stages."""
    server, outsider, grant = guarded
    env = {**s3_env(server), **outsider, WAIT_VARIABLE: "60"}
    args = data_args(f"s3://{DATA_BUCKET}/private.jsonl", tmp_path)
    staging = subprocess.Popen(
        [sys.executable, "-m", "trainer.stage", *args], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        time.sleep(3)  # denied at least once
        grant()
        _, stderr = staging.communicate(timeout=120)
    finally:
        if staging.poll() is None:
            staging.kill()
            staging.wait()
    assert staging.returncode == 0, stderr
    assert f"trainer.s3: AccessDenied on s3://{DATA_BUCKET}/private.jsonl; retry in 2 s" in stderr


def test_a_model_upload_that_fails_names_the_uri_and_the_aws_error(
    s3: LocalS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ends the run (trainer/train.py export) when the model cannot be written: the object's URI and S3's error."""
    from trainer.base.s3.model_upload import upload_model
    from trainer.base.s3.transfer import S3Error

    for name, value in {**s3.client_environment(), WAIT_VARIABLE: "0"}.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(S3Error, match=r"s3://no-such-artifacts/run-1/model/: NoSuchBucket: The specified"):
        upload_model(tmp_path, "s3://no-such-artifacts/run-1")


def test_a_model_exported_again_leaves_no_file_of_the_earlier_export(
    s3: LocalS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run exported again (another shard count, LoRA's adapter no more) replaces the model: `aws s3 cp --recursive`
    of model/ brings exactly the new export."""
    from trainer.base.s3.model_upload import upload_model

    for name, value in {**s3.client_environment(), WAIT_VARIABLE: "0"}.items():
        monkeypatch.setenv(name, value)
    run = f"s3://{ARTIFACTS_BUCKET}/runs/again/run-1"
    first, second = tmp_path / "first", tmp_path / "second"
    for directory, files in ((first, ("config.json", "model-00001-of-00002.safetensors", "adapter/a.json")),
                             (second, ("config.json", "model.safetensors"))):  # fmt: skip
        for name in files:
            (directory / name).parent.mkdir(parents=True, exist_ok=True)
            (directory / name).write_text(name)
    upload_model(first, run)
    upload_model(second, run)
    assert sorted(keys(s3, f"{run}/model/")) == [
        "runs/again/run-1/model/config.json",
        "runs/again/run-1/model/export-manifest.json",
        "runs/again/run-1/model/model.safetensors",
    ]


def test_the_model_is_complete_once_its_manifest_names_every_file_as_s3_lists_it(
    s3: LocalS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainer.base.s3.model_upload import MANIFEST, model_uri, read_manifest, upload_model
    from trainer.base.s3.transfer import list_objects

    for name, value in {**s3.client_environment(), WAIT_VARIABLE: "0"}.items():
        monkeypatch.setenv(name, value)
    run = f"s3://{ARTIFACTS_BUCKET}/runs/manifest/run-1"
    for name, size in (("config.json", 10), ("model.safetensors", 3000)):
        (tmp_path / name).write_bytes(b"x" * size)
    model = upload_model(tmp_path, run)
    manifest = read_manifest(model)
    listed = list_objects(model)
    assert manifest is not None and manifest.matches(model, listed)
    assert [(f.name, f.size) for f in manifest.files] == [("config.json", 10), ("model.safetensors", 3000)]
    assert {f.etag for f in manifest.files} == {o.etag for o in listed if not o.key.endswith(MANIFEST)}
    assert model == model_uri(run)


def test_an_export_that_fails_midway_leaves_no_manifest_behind(
    s3: LocalS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The manifest goes first: from then on, until the new one is written last, no reader takes the model for whole,
    whatever mixture of two exports the prefix holds."""
    from trainer.base.s3 import model_upload
    from trainer.base.s3.transfer import S3Error, call

    for name, value in {**s3.client_environment(), WAIT_VARIABLE: "0"}.items():
        monkeypatch.setenv(name, value)
    run = f"s3://{ARTIFACTS_BUCKET}/runs/midway/run-1"
    (tmp_path / "config.json").write_text("{}")
    model = model_upload.upload_model(tmp_path, run)
    assert model_upload.read_manifest(model) is not None

    def one_file_then_fail(directory: Path, target: S3Uri, client: Any) -> list[S3Uri]:
        uri = target.join("config.json")
        call(uri, lambda: client.put_object(Bucket=uri.bucket, Key=uri.key, Body=b'{"new": 1}'))
        raise S3Error(f"{target.join('model.safetensors')}: SlowDown: Please reduce your request rate.", "SlowDown")

    monkeypatch.setattr(model_upload, "upload_directory", one_file_then_fail)
    with pytest.raises(S3Error, match="SlowDown"):
        model_upload.upload_model(tmp_path, run)
    assert model_upload.read_manifest(model) is None


def test_an_object_written_again_after_its_listing_is_not_staged_as_the_listed_version(
    s3: LocalS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Staging downloads each object If-Match the ETag its listing found, the one the manifest records: an object
    written again in between fails staging, naming it, and no manifest claims the files complete."""
    from trainer.base.errors import InputError
    from trainer.base.s3.inputs import dataset_objects, read_manifest, stage_objects
    from trainer.base.s3.transfer import client

    for name, value in {**s3.client_environment(), WAIT_VARIABLE: "0"}.items():
        monkeypatch.setenv(name, value)
    uri = S3Uri.parse(f"s3://{DATA_BUCKET}/changing.jsonl")
    put(s3, str(uri), jsonl(RECORDS[:1]))
    listed = dataset_objects(uri, client())
    put(s3, str(uri), jsonl(RECORDS[:2]))
    with pytest.raises(InputError, match=rf"{uri} changed while it was being staged \(its ETag is no longer"):
        stage_objects(uri, listed, tmp_path, "--dataset", client())
    assert read_manifest(tmp_path, uri) is None
    staged = stage_objects(uri, dataset_objects(uri, client()), tmp_path, "--dataset", client())
    assert read_manifest(tmp_path, uri) == staged
