"""The local run through S3: moto's S3 API on 127.0.0.1, the pods' own s3:// paths, a file system lost with its cluster.

Each run is a fixture, made once per module: (a) the dev stack's job, one agent, puts its model and checkpoints in the
local S3 and the summary names them; (b) a data set put into the local S3 with --s3-upload is the one trained on;
(c) lost-storage: two agents killed with their file system once a checkpoint is in S3, the job started again on one,
resuming from S3; (d) an s3:// data set that is not there ends the run at staging, once.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from local.agents import START_MARK
from local.artifacts import S3Upload
from local.options import LocalOptions
from local.run import run_local
from local.supervise import LocalResult
from tests.local.runs import RUN_TIMEOUT_S, TEST_TIMEOUT_S, log_of, processes_mentioning
from trainer.base.pod.exits import EXIT_STAGING_FAILED
from trainer.base.s3.model_upload import model_uri
from trainer.base.s3.uri import S3Uri
from trainer.checkpoint.s3_store import checkpoint_uri, checkpoints_root
from trainer.data.packing import synthetic_records
from trainer.record.archive import METRICS_FILE, SUMMARY_FILE, record_uri
from trainer.record.chart import CHART_FILE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(TEST_TIMEOUT_S)]

STEPS = 20
CHECKPOINT_EVERY = 10
# lost-storage waits for a checkpoint in S3 (listed once a second) before it fires: steps enough after the first that
# the job is still running then, even on two busy cores.
DRILL_STEPS = 40
DATASET = "s3://local-data/sets/train.jsonl"


def dev_options(work_dir: Path, **job: Any) -> LocalOptions:
    """The dev stack's job, locally, for STEPS steps unless `job` (LocalJobOptions fields) says else."""
    options = LocalOptions(stack="dev", work_dir=work_dir, timeout_s=RUN_TIMEOUT_S)
    changes = {"steps": STEPS, "checkpoint_every": CHECKPOINT_EVERY, **job}
    return dataclasses.replace(options, job=dataclasses.replace(options.job, **changes))


def artifacts_uri(result: LocalResult) -> str:
    uri = result.plan.trainer.artifacts.uri
    assert uri is not None, "the job wrote no artifacts to S3"
    return uri


def s3_server_left(result: LocalResult) -> list[str]:
    """moto's server of the run, if it is still running (its command line names its port)."""
    port = result.plan.agents[0].env["AWS_ENDPOINT_URL"].rpartition(":")[2]
    return processes_mentioning(f"moto.server -H 127.0.0.1 -p {port}")


@pytest.fixture(scope="module")
def printed() -> list[str]:
    return []


@pytest.fixture(scope="module")
def dev_run(tmp_path_factory: pytest.TempPathFactory, printed: list[str]) -> LocalResult:
    return run_local(dataclasses.replace(dev_options(tmp_path_factory.mktemp("s3-dev")), echo=printed.append))


@pytest.fixture(scope="module")
def s3_dataset_run(tmp_path_factory: pytest.TempPathFactory) -> LocalResult:
    work_dir = tmp_path_factory.mktemp("s3-dataset")
    data = work_dir / "train.jsonl"
    data.write_text("".join(json.dumps(record) + "\n" for record in synthetic_records(200)))
    options = dev_options(work_dir, steps=CHECKPOINT_EVERY, dataset=DATASET)
    return run_local(dataclasses.replace(options, s3_uploads=(S3Upload(data, S3Uri.parse(DATASET)),)))


@pytest.fixture(scope="module")
def lost_storage_run(tmp_path_factory: pytest.TempPathFactory) -> LocalResult:
    """Two agents; once a checkpoint is complete in S3, both lost with their file system; the job again on one."""
    options = dev_options(tmp_path_factory.mktemp("lost-storage"), nodes=2, steps=DRILL_STEPS)
    return run_local(dataclasses.replace(options, drill="lost-storage"))


@pytest.fixture(scope="module")
def missing_dataset_run(tmp_path_factory: pytest.TempPathFactory) -> LocalResult:
    work_dir = tmp_path_factory.mktemp("s3-missing")
    other = work_dir / "other.jsonl"
    other.write_text('{"text": "the bucket exists; the object asked for does not"}\n')
    options = dev_options(work_dir, steps=CHECKPOINT_EVERY, dataset=DATASET)
    uploads = (S3Upload(other, S3Uri.parse("s3://local-data/sets/other.jsonl")),)
    return run_local(dataclasses.replace(options, s3_uploads=uploads))


# (a) the dev stack's job: the model and the checkpoints in the local S3, named by the summary


def test_dev_run_puts_the_model_in_the_local_s3(dev_run: LocalResult) -> None:
    assert dev_run.succeeded, dev_run.reason
    assert dev_run.artifacts is not None
    assert dev_run.artifacts.model == model_uri(artifacts_uri(dev_run))
    assert {"config.json", "model.safetensors"} <= set(dev_run.artifacts.model_files)


def test_dev_run_summary_prints_the_models_s3_uri_and_the_last_checkpoint(
    dev_run: LocalResult, printed: list[str]
) -> None:
    summary = printed[-1]
    assert f"model in S3:    {model_uri(artifacts_uri(dev_run))}" in summary
    last = checkpoint_uri(checkpoints_root(artifacts_uri(dev_run)), STEPS)
    assert f"S3 checkpoint:  {last} (step {STEPS})" in summary


def test_dev_run_keeps_its_record_beside_the_model(dev_run: LocalResult, printed: list[str]) -> None:
    """metrics, summary and chart in <artifactsUri>record/, where pulumi destroy does not reach."""
    assert dev_run.artifacts is not None and dev_run.artifacts.record == record_uri(artifacts_uri(dev_run))
    assert sorted(dev_run.artifacts.record_files) == sorted([CHART_FILE, METRICS_FILE, SUMMARY_FILE])
    summary = dev_run.artifacts.record_summary
    assert summary is not None and (summary["steps"], summary["total_steps"]) == (STEPS, STEPS)
    assert f"record in S3:   {record_uri(artifacts_uri(dev_run))} (" in printed[-1]


def test_dev_run_writes_under_the_stacks_run_prefix_in_the_local_bucket(dev_run: LocalResult) -> None:
    assert artifacts_uri(dev_run).startswith("s3://fsdp-eks-dev-artifacts-local/fsdp-eks/dev/run-")


def test_dev_run_stops_the_s3_server_it_started(dev_run: LocalResult) -> None:
    assert s3_server_left(dev_run) == []


# (b) an s3:// data set, put into the local S3 before the run


def test_s3_dataset_is_staged_from_the_local_s3_and_trained_on(s3_dataset_run: LocalResult) -> None:
    assert s3_dataset_run.succeeded, s3_dataset_run.reason
    assert s3_dataset_run.plan.trainer.data.dataset == DATASET
    assert f"tokenised {DATASET}: " in log_of(s3_dataset_run, 0)  # trainer/data/cache.py, once staged
    assert s3_dataset_run.summary is not None and s3_dataset_run.summary.steps == CHECKPOINT_EVERY


# (c) lost-storage: the cluster and its file system lost, the job resumed from S3 at another world size


def test_lost_storage_kills_every_pod_and_deletes_the_shared_file_system(lost_storage_run: LocalResult) -> None:
    drill = lost_storage_run.drill
    assert drill is not None and drill.checkpoint_step is not None
    assert drill.at_step < DRILL_STEPS, "the drill fired only after the job had finished"
    assert len(drill.killed) >= 4, "expected both agents and their workers"
    assert "the shared file system deleted" in drill.detail


def test_lost_storage_job_resumes_from_its_own_s3_checkpoint_not_step_0(lost_storage_run: LocalResult) -> None:
    drill = lost_storage_run.drill
    assert drill is not None and drill.checkpoint_step is not None and drill.checkpoint_step > 0
    own = checkpoint_uri(checkpoints_root(artifacts_uri(lost_storage_run)), drill.checkpoint_step)
    assert drill.resumed_from == str(own)
    assert drill.resumed_tier == "this run's durable tier (--artifacts-uri)"


def test_lost_storage_job_finishes_at_another_world_size_with_the_model_in_s3(lost_storage_run: LocalResult) -> None:
    assert lost_storage_run.succeeded, lost_storage_run.reason
    summary = lost_storage_run.summary
    assert summary is not None and summary.steps == DRILL_STEPS
    assert summary.world_sizes == [2, 1]
    assert lost_storage_run.artifacts is not None and lost_storage_run.artifacts.model is not None


def test_lost_storage_record_holds_the_steps_before_and_after_the_file_system_was_lost(
    lost_storage_run: LocalResult,
) -> None:
    """The new file system starts without the metrics file; the run takes its record's back before it logs again."""
    assert lost_storage_run.artifacts is not None
    summary = lost_storage_run.artifacts.record_summary
    assert summary is not None and summary["steps"] == DRILL_STEPS and summary["world_sizes"] == [2, 1]


def test_lost_storage_run_stops_every_process_it_started(lost_storage_run: LocalResult) -> None:
    assert processes_mentioning(str(lost_storage_run.work_dir)) == []
    assert s3_server_left(lost_storage_run) == []


# (d) an s3:// data set that is not there: staging fails once, with the URI and S3's error; nothing restarts


def test_missing_s3_dataset_fails_at_staging_with_the_uri_and_the_aws_error(missing_dataset_run: LocalResult) -> None:
    assert not missing_dataset_run.succeeded
    reason = missing_dataset_run.reason
    assert f"exit {EXIT_STAGING_FAILED} (staging failed)" in reason
    assert DATASET in reason and "NoSuch" in reason, reason


def test_missing_s3_dataset_starts_no_training_and_no_restart(missing_dataset_run: LocalResult) -> None:
    assert missing_dataset_run.pod_restarts == 0
    assert missing_dataset_run.records == []
    starts = [line for line in log_of(missing_dataset_run, 0).splitlines() if line.startswith(START_MARK)]
    assert len(starts) == 1, starts
