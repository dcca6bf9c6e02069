"""How the local run reaches S3: the kubelet's `$(VAR)` expansion that names the local bucket in the pod's
--artifacts-uri, the local bucket's name, --s3-upload, and the local S3 API's uploads and listings (moto's server)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from local.artifacts import LocalStorage, S3Upload, local_bucket
from local.config import local_stack_config
from local.options import LocalJobOptions
from local.pytorchjob.launch import local_plan
from local.s3 import LocalS3
from stack.names import ARTIFACTS_BUCKET_VARIABLE
from trainer.base.s3.endpoint import ENDPOINT_VARIABLE
from trainer.base.s3.model_upload import ModelManifest, manifest_uri, model_uri
from trainer.base.s3.transfer import list_objects
from trainer.base.s3.uri import S3Uri, bucket_name_problem
from workloads.job.pod import expand_references
from workloads.job.pytorchjob import pytorchjob_manifest
from workloads.job.spec import job_spec

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    ("value", "expanded"),
    [
        ("s3://$(BUCKET)/fsdp-eks/dev/run-1", "s3://local-bucket/fsdp-eks/dev/run-1"),
        ("$(BUCKET)-$(BUCKET)", "local-bucket-local-bucket"),
        ("$$(BUCKET)", "$(BUCKET)"),  # escaped: the kubelet writes the reference itself
        ("$(UNSET)/x", "$(UNSET)/x"),  # no such variable: left as written
        ("$BUCKET and $(BUCKET", "$BUCKET and $(BUCKET"),  # not references
    ],
)
def test_references_expand_as_the_kubelet_expands_them(value: str, expanded: str) -> None:
    assert expand_references(value, {"BUCKET": "local-bucket"}) == expanded


@pytest.mark.parametrize("stack", ["dev", "p5-16", "Team_Stack.2026"])
def test_the_local_bucket_is_a_valid_name_made_from_the_stack(stack: str) -> None:
    bucket = local_bucket(stack, None)
    assert bucket_name_problem(bucket) is None
    assert bucket.endswith("-artifacts-local")


def test_a_stack_that_names_its_bucket_gets_that_name_locally() -> None:
    assert local_bucket("dev", "team-models") == "team-models"


def test_s3_upload_takes_a_path_and_an_s3_uri(tmp_path: Path) -> None:
    data = tmp_path / "train.jsonl"
    data.write_text("{}\n")
    assert S3Upload.parse(f"{data}=s3://local-data/sets/train.jsonl") == S3Upload(
        data, S3Uri("local-data", "sets/train.jsonl")
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("train.jsonl", "expected PATH=s3://bucket/key"),
        ("{missing}=s3://local-data/x.jsonl", "no such file or directory"),
        ("{data}=s3://UPPER/x.jsonl", "not a valid S3 bucket name"),
    ],
)
def test_s3_upload_refuses_what_it_cannot_upload(tmp_path: Path, value: str, message: str) -> None:
    (tmp_path / "data").write_text("{}\n")
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        S3Upload.parse(value.format(missing=tmp_path / "missing", data=tmp_path / "data"))


def test_the_pods_artifacts_uri_names_the_local_bucket_and_every_container_reaches_the_local_api() -> None:
    config, _ = local_stack_config("dev", LocalJobOptions())
    manifest = pytorchjob_manifest(job_spec(config))
    command = " ".join(
        manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["command"]
    )
    assert f"$({ARTIFACTS_BUCKET_VARIABLE})" in command  # what the cluster's kubelet expands
    stand_ins = {ENDPOINT_VARIABLE: "http://127.0.0.1:9", ARTIFACTS_BUCKET_VARIABLE: "fsdp-eks-dev-artifacts-local"}
    plan = local_plan(manifest, Path("/tmp/fsdp-eks-local-test"), "127.0.0.1:23790", 19300, stand_ins)
    assert str(plan.trainer.artifacts.uri).startswith("s3://fsdp-eks-dev-artifacts-local/")
    assert all(f"$({ARTIFACTS_BUCKET_VARIABLE})" not in arg for arg in plan.agents[0].argv)
    for agent in plan.agents:
        assert agent.env[ENDPOINT_VARIABLE] == "http://127.0.0.1:9"
        assert agent.env[ARTIFACTS_BUCKET_VARIABLE] == "fsdp-eks-dev-artifacts-local"


@pytest.fixture(scope="module")
def s3() -> Iterator[LocalS3]:
    with LocalS3.start() as server:
        yield server


def test_a_directory_uploads_recursively_under_the_prefix(s3: LocalS3, tmp_path: Path) -> None:
    (tmp_path / "shards" / "b").mkdir(parents=True)
    (tmp_path / "shards" / "a.jsonl").write_text("{}\n")
    (tmp_path / "shards" / "b" / "c.txt").write_text("text\n")
    written = s3.upload(tmp_path / "shards", S3Uri("local-data", "sets/shards"))
    assert [str(uri) for uri in written] == [
        "s3://local-data/sets/shards/a.jsonl",
        "s3://local-data/sets/shards/b/c.txt",
    ]
    assert s3.keys(S3Uri("local-data", "sets/shards")) == ["sets/shards/a.jsonl", "sets/shards/b/c.txt"]


def test_artifacts_list_the_model_and_only_complete_checkpoints(s3: LocalS3) -> None:
    storage = LocalStorage(s3, "fsdp-eks-test-artifacts-local")
    s3.create_bucket(storage.bucket)
    run = f"s3://{storage.bucket}/fsdp-eks/test/run-1"
    client = s3.client()
    for key in ["model/config.json", "model/model.safetensors", "checkpoints/step_00000010/.metadata",
                "checkpoints/step_00000010/meta.json", "checkpoints/step_00000020/.metadata"]:  # fmt: skip
        client.put_object(Bucket=storage.bucket, Key=f"fsdp-eks/test/run-1/{key}", Body=b"{}")
    incomplete = storage.artifacts(run)  # the model's files, but no manifest yet: an export in flight, or failed
    assert incomplete.model is None and incomplete.lines()[0] == f"model in S3:    none complete under {run}"
    model = model_uri(run)
    manifest = ModelManifest.of(model, list_objects(model, client))
    client.put_object(Bucket=storage.bucket, Key=manifest_uri(model).key, Body=manifest.to_json().encode())
    artifacts = storage.artifacts(run)
    assert str(artifacts.model) == f"{run}/model/"
    assert artifacts.model_files == ("config.json", "model.safetensors")
    assert [checkpoint.step for checkpoint in artifacts.checkpoints] == [10]  # step 20 has no meta.json yet
    assert storage.newest_checkpoint_step(run) == 10
    assert artifacts.lines()[0] == f"model in S3:    {run}/model/ (2 files)"
    client.put_object(Bucket=storage.bucket, Key="fsdp-eks/test/run-1/model/stray.json", Body=b"{}")
    assert storage.artifacts(run).model is None  # the manifest no longer names what is there


def test_creating_a_bucket_twice_keeps_its_objects(s3: LocalS3) -> None:
    s3.create_bucket("twice-created")
    s3.client().put_object(Bucket="twice-created", Key="kept", Body=b"x")
    s3.create_bucket("twice-created")
    assert s3.keys(S3Uri("twice-created")) == ["kept"]
