"""Checkpoints reach S3, the durable tier, and a run resumes from there: through the S3 connector for PyTorch's DCP
writer and reader, against a real S3 API (moto's server on 127.0.0.1, local/s3.py), as on AWS; the two-rank run
against one that throttles and enforces the pods' IAM policy (tests/harness/s3_server.py, moto_iam.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed.checkpoint as dcp

from infra.s3_access import artifacts_policy
from local.s3 import LocalS3
from tests.harness.moto_iam import guarded_s3
from tests.harness.s3_server import ThrottlePlan, throttle, throttle_count
from tests.harness.trainer_runs import TINY, TrainerRun, assert_same_losses, run_trainer, with_flags
from trainer.base.pod.exits import EXIT_BAD_INPUT
from trainer.base.s3.dcp import S3Writer
from trainer.base.s3.model_upload import model_uri, read_manifest
from trainer.base.s3.transfer import list_objects
from trainer.base.s3.uri import S3Uri
from trainer.checkpoint.layout import META_FILE, checkpoint_name, complete_checkpoints
from trainer.checkpoint.s3_reader import CountingS3Reader
from trainer.checkpoint.s3_store import S3Checkpoints, resume_source

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

BUCKET = "fsdp-eks-checkpoints"
KILLED = S3Uri(BUCKET, "killed")
"""The artifacts of a 2-rank run killed after step 3, its checkpoint of step 3 on S3 (the `killed_run` fixture)."""


@pytest.fixture(scope="module")
def s3() -> Iterator[LocalS3]:
    with LocalS3.start() as server:
        server.create_bucket(BUCKET)
        yield server


@pytest.fixture
def s3_environment(s3: LocalS3, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """This process reaches the local S3 API as the trainer's processes do."""
    environment = s3.client_environment()
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    return environment


def keys(s3: LocalS3, prefix: S3Uri, client: Any = None) -> list[str]:
    listed = (client or s3.client()).list_objects_v2(Bucket=prefix.bucket, Prefix=prefix.prefix)
    return sorted(item["Key"][len(prefix.prefix) :] for item in listed.get("Contents", []))


def copy_prefix(s3: LocalS3, source: S3Uri, target: S3Uri, leave_out: str | None = None) -> None:
    client = s3.client()
    for key in keys(s3, source):
        if key != leave_out:
            copy = {"Bucket": source.bucket, "Key": source.join(key).key}
            client.copy_object(Bucket=target.bucket, Key=target.join(key).key, CopySource=copy)


def steps_from(run: TrainerRun, first: int) -> dict[int, float]:
    return {step: loss for step, loss in run.losses().items() if step >= first}


def test_a_dcp_checkpoint_round_trips_through_the_s3_connector(s3: LocalS3, s3_environment: dict[str, str]) -> None:
    uri = S3Uri(BUCKET, "round-trip/step_00000001")
    saved = {"weights": torch.arange(12, dtype=torch.float32).reshape(3, 4), "step": torch.tensor(7)}
    dcp.save(saved, storage_writer=S3Writer(uri, writers=1), no_dist=True)
    assert keys(s3, uri) == [".metadata", "00/__0_0.distcp"]  # the rank's shard under its own prefix

    loaded = {"weights": torch.zeros(3, 4), "step": torch.tensor(0)}
    reader = CountingS3Reader(uri)
    dcp.load(loaded, storage_reader=reader, no_dist=True)
    assert torch.equal(loaded["weights"], saved["weights"]) and int(loaded["step"]) == 7
    assert reader.bytes_read >= 12 * 4  # counted as on a file system: the stored length of every item read


def test_only_checkpoints_with_meta_json_are_complete_and_a_prune_deletes_the_rest(
    s3: LocalS3, s3_environment: dict[str, str]
) -> None:
    root = S3Uri(BUCKET, "listing/checkpoints")
    client = s3.client()
    for step, files in ((2, [".metadata", "__0_0.distcp", META_FILE]), (4, [".metadata", "__0_0.distcp"])):
        for name in files:
            client.put_object(Bucket=BUCKET, Key=root.join(checkpoint_name(step), name).key, Body=b"{}")
    store = S3Checkpoints(root)
    assert [(c.step, c.complete) for c in store.all()] == [(2, True), (4, False)]
    assert resume_source(root) == store.complete()[-1]  # step 2: the partial step 4 is never read
    assert resume_source(root.join(checkpoint_name(4))) is None
    assert resume_source(S3Uri(BUCKET, "listing")) == store.complete()[-1]  # a run's artifacts: its checkpoints/
    assert [c.step for c in store.prune(keep=1)] == [4]
    assert keys(s3, root) == ["step_00000002/.metadata", "step_00000002/__0_0.distcp", "step_00000002/meta.json"]


def test_two_ranks_throttled_and_held_to_the_pods_policy_commit_every_checkpoint_and_export_the_model(
    reference_run: TrainerRun, tmp_path: Path
) -> None:
    """The S3 API as AWS answers a burst (tests/harness/s3_server.py): every fourth write and the first 4 of every 40
    answered 503 SlowDown, and IAM enforced on the pods' own policy documents (infra/s3_access.py artifacts_policy,
    the run's prefix alone), assumed as a role. Two ranks save in the background every 2 steps: every save is
    committed by meta.json, older ones pruned, each rank's shard under its own prefix, and the model exported with
    its manifest last; training is as without S3."""
    bucket, run_key = "fsdp-eks-dev-artifacts-throttled", "fsdp-eks/dev/run-1/"
    artifacts = S3Uri(bucket, run_key.rstrip("/"))
    with guarded_s3() as guarded:
        guarded.s3.create_bucket(Bucket=bucket)
        pods = guarded.role_session("pods", [artifacts_policy("aws", bucket, run_key)])
        throttle(guarded.server, ThrottlePlan(every=4, burst_every=40, burst_length=4))
        args = [*with_flags(TINY, checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every="2", keep_checkpoints="2",
                            artifacts_uri=str(artifacts)), "--async-checkpoint"]  # fmt: skip
        run = run_trainer(args, tmp_path, nproc=2, env={**guarded.server.client_environment(), **pods}, timeout=240)
        assert run.returncode == 0, run.output
        count = throttle_count(guarded.server)
        root, model = artifacts.join("checkpoints"), model_uri(str(artifacts))
        listed = keys(guarded.server, root, guarded.s3)
        complete = read_manifest(model, guarded.s3)
        model_objects = list_objects(model, guarded.s3)
    assert count.throttled >= count.writes // 4 and count.longest_run >= 4, count
    assert_same_losses(run.losses(), reference_run.losses())
    shards = [".metadata", "00/__0_0.distcp", "10/__1_0.distcp", META_FILE]
    assert listed == [f"{checkpoint_name(step)}/{key}" for step in (4, 6) for key in shards]
    assert complete is not None and complete.matches(model, model_objects)
    assert {f.name for f in complete.files} >= {"config.json", "model.safetensors"}
    last = run.metrics[-1]
    assert last["checkpoint_s3_bytes"] > 0 and last["checkpoint_s3_save_s"] > 0
    assert last["checkpoint_s3_failed_saves"] == 0


def test_s3_gets_every_nth_checkpoint_and_the_last(s3: LocalS3, tmp_path: Path) -> None:
    artifacts = S3Uri(BUCKET, "every-nth")
    args = with_flags(TINY, steps="5", checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every="1",
                      keep_checkpoints="5", artifacts_uri=str(artifacts), s3_checkpoint_every="2")  # fmt: skip
    run = run_trainer(args, tmp_path, env=s3.client_environment())
    assert run.returncode == 0, run.output
    assert [step for step, _ in complete_checkpoints(tmp_path / "ckpt")] == [1, 2, 3, 4, 5]
    assert [c.step for c in S3Checkpoints(artifacts.join("checkpoints"), s3.client()).complete()] == [2, 4, 5]


@pytest.fixture(scope="module")
def killed_run(s3: LocalS3, tmp_path_factory: pytest.TempPathFactory) -> TrainerRun:
    """2 ranks (FULL_SHARD), killed after step 3; its checkpoint of step 3 is on S3 under KILLED."""
    workdir = tmp_path_factory.mktemp("killed")
    args = with_flags(TINY, checkpoint_dir=str(workdir / "ckpt"), checkpoint_every="3", artifacts_uri=str(KILLED))
    run = run_trainer(args, workdir, nproc=2, fault="kill_after_step:3", env=s3.client_environment())
    assert run.returncode != 0
    assert [c.step for c in S3Checkpoints(KILLED.join("checkpoints"), s3.client()).complete()] == [3]
    return run


def test_a_run_resumes_from_s3_at_another_world_size(
    s3: LocalS3, killed_run: TrainerRun, reference_run: TrainerRun, tmp_path: Path
) -> None:
    """A fresh run, one process with an empty --checkpoint-dir: DCP reshards the 2-rank checkpoint it reads from S3."""
    resume_from = KILLED.join("checkpoints")
    args = with_flags(TINY, checkpoint_dir=str(tmp_path / "empty"), resume_from=str(resume_from))
    resumed = run_trainer(args, tmp_path, env=s3.client_environment())
    assert resumed.returncode == 0, resumed.output
    assert f"resumed from {resume_from.join(checkpoint_name(3))}, --resume-from (saved by 2 ranks" in resumed.output
    assert [r["step"] for r in resumed.metrics] == [4, 5, 6] and {r["world_size"] for r in resumed.metrics} == {1}
    assert_same_losses(resumed.losses(), steps_from(reference_run, 4))
    assert resumed.metrics[0]["checkpoint_read_bytes"] > 0


def test_the_runs_own_durable_tier_is_used_when_the_fast_tier_is_empty_and_a_partial_one_is_ignored(
    s3: LocalS3, killed_run: TrainerRun, reference_run: TrainerRun, tmp_path: Path
) -> None:
    """As a stack destroyed and brought up again with the same bucket: FSx is new, the artifacts are where they were.
    A step_5 without meta.json (a save cut short) lies beside step_3: it is not read."""
    artifacts = S3Uri(BUCKET, "recreated")
    step_3 = KILLED.join("checkpoints", checkpoint_name(3))
    copy_prefix(s3, step_3, artifacts.join("checkpoints", checkpoint_name(3)))
    copy_prefix(s3, step_3, artifacts.join("checkpoints", checkpoint_name(5)), leave_out=META_FILE)
    args = with_flags(TINY, checkpoint_dir=str(tmp_path / "new-fsx"), checkpoint_every="3",
                      artifacts_uri=str(artifacts))  # fmt: skip
    resumed = run_trainer(args, tmp_path, nproc=2, env=s3.client_environment())
    assert resumed.returncode == 0, resumed.output
    own = artifacts.join("checkpoints", checkpoint_name(3))
    assert f"resumed from {own}, this run's durable tier (--artifacts-uri) (saved by 2 ranks" in resumed.output
    assert_same_losses(resumed.losses(), steps_from(reference_run, 4))
    # The new save of step 6 pruned the partial step 5 and kept step 3 (--keep-checkpoints 3).
    assert [(c.step, c.complete) for c in S3Checkpoints(artifacts.join("checkpoints"), s3.client()).all()] == [
        (3, True),
        (6, True),
    ]


def test_resume_from_a_prefix_without_a_complete_checkpoint_is_bad_input(s3: LocalS3, tmp_path: Path) -> None:
    partial = S3Uri(BUCKET, "partial/checkpoints")
    s3.client().put_object(Bucket=BUCKET, Key=partial.join(checkpoint_name(2), ".metadata").key, Body=b"")
    args = with_flags(TINY, checkpoint_dir=str(tmp_path / "ckpt"), resume_from=str(partial))
    run = run_trainer(args, tmp_path, env=s3.client_environment())
    assert run.returncode == EXIT_BAD_INPUT, run.output
    assert f"--resume-from {partial}: no complete checkpoint there" in run.output


def test_resume_from_a_checkpoint_of_another_model_is_bad_input(
    s3: LocalS3, killed_run: TrainerRun, tmp_path: Path
) -> None:
    step_3 = S3Uri(BUCKET, "other-model/step_00000003")
    copy_prefix(s3, KILLED.join("checkpoints", checkpoint_name(3)), step_3)
    client = s3.client()
    meta = json.loads(client.get_object(Bucket=BUCKET, Key=step_3.join(META_FILE).key)["Body"].read())
    meta["model"]["hidden_size"] += 64
    client.put_object(Bucket=BUCKET, Key=step_3.join(META_FILE).key, Body=json.dumps(meta).encode())
    args = with_flags(TINY, checkpoint_dir=str(tmp_path / "ckpt"), resume_from=str(step_3))
    run = run_trainer(args, tmp_path, env=s3.client_environment())
    assert run.returncode == EXIT_BAD_INPUT, run.output
    assert f"--resume-from: checkpoint {step_3} is from an incompatible model (hidden_size" in run.output


def test_failed_s3_saves_warn_and_training_goes_on_but_a_failed_last_save_fails_the_run(
    s3: LocalS3, tmp_path: Path
) -> None:
    """The artifacts bucket deleted once the run has started (tests/trainer/bucket_loss_probe.py): every save to it
    fails. Steps 1 to 3 warn and go on from the fast tier; the last step's failure fails the run, naming the URI."""
    artifacts = S3Uri("lost-bucket", "run")
    s3.create_bucket(artifacts.bucket)
    args = with_flags(TINY, steps="4", checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every="1",
                      artifacts_uri=str(artifacts))  # fmt: skip
    run = run_trainer(args, tmp_path, module="tests.trainer.bucket_loss_probe", env=s3.client_environment())
    assert run.returncode != 0, run.output
    for step in (1, 2, 3):
        uri = artifacts.join("checkpoints", checkpoint_name(step))
        assert f"checkpoint of step {step} not saved to {uri}" in run.output
    assert [r["step"] for r in run.metrics] == [1, 2, 3, 4]
    assert [r["checkpoint_s3_failed_saves"] for r in run.metrics] == [0, 1, 2, 3]
    assert [step for step, _ in complete_checkpoints(tmp_path / "ckpt")][-1] == 4
    assert f"the last checkpoint was not saved to {artifacts.join('checkpoints', checkpoint_name(4))}" in run.output

    # Run again once the bucket is back: nothing is left to train, and the last checkpoint reaches S3.
    s3.create_bucket(artifacts.bucket)
    again = run_trainer(args, tmp_path, env=s3.client_environment())
    assert again.returncode == 0, again.output
    assert [c.step for c in S3Checkpoints(artifacts.join("checkpoints"), s3.client()).complete()] == [4]
