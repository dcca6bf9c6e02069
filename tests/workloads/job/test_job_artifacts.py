"""The job's S3 side: every pod, on either job API, holds the artifacts bucket's name in its environment and names it in
--artifacts-uri through a $(VAR) reference, so that the flags are known at preview and only the variable's value
waits for a bucket the stack creates; with --s3-checkpoint-every and --resume-from from the stack's keys."""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any

import pytest

from stack.config import StackConfig
from stack.fields import NAMESPACE
from stack.files import raw_stack_config
from stack.job_api import JOB_APIS, PYTORCHJOB, TRAINJOB
from stack.names import ARTIFACTS_BUCKET_VARIABLE
from tests.harness.pulumi_program import ProgramRun, run_program
from trainer.base.flags.config import parse_args
from trainer.base.s3.uri import S3Uri
from workloads.job.api import job_api_for
from workloads.job.pod import UNCREATED_BUCKET, expand_references
from workloads.job.spec import JobSpec, job_spec
from workloads.job.trainjob import trainjob_manifest

from .job_stacks import IMAGE, config_of
from .trainjob_stacks import trainjob_raw_config

REFERENCE = f"$({ARTIFACTS_BUCKET_VARIABLE})"
FLAG = f"s3://{REFERENCE}/fsdp-eks/dev/run-1"
GIVEN_BUCKET = "team-ml-artifacts"


def with_artifacts(config: StackConfig, **changes: Any) -> StackConfig:
    return dataclasses.replace(config, artifacts=dataclasses.replace(config.artifacts, **changes))


def spec_for(api: str, config: StackConfig | None = None) -> JobSpec:
    config = config or config_of("dev")
    return job_spec(dataclasses.replace(config, job=dataclasses.replace(config.job, api=api)), IMAGE)


def container(pod: dict[str, Any]) -> dict[str, Any]:
    (only,) = pod["spec"]["containers"]
    return only


def env(pod: dict[str, Any]) -> dict[str, str]:
    """The container's literal variables (not those the kubelet fills from the downward API, such as NODE_NAME)."""
    return {e["name"]: e["value"] for e in container(pod)["env"] if "value" in e}


def trainer_flags(command: list[str]) -> list[str]:
    """The `python -m trainer` flags of a launcher command (after `-m trainer`)."""
    return command[command.index("trainer") + 1 :]


def command_of(spec: JobSpec) -> list[str]:
    """The command each pod runs: the PyTorchJob's container's, or what the TrainJob sets for the runtime's node."""
    if spec.api == TRAINJOB:
        return trainjob_manifest(spec)["spec"]["trainer"]["command"]
    return container(job_api_for(spec.api).worker_pod(spec))["command"]


@pytest.mark.parametrize("api", JOB_APIS)
def test_the_artifacts_uri_names_the_bucket_through_the_containers_variable(api: str) -> None:
    spec = spec_for(api)
    flags = trainer_flags(command_of(spec))
    assert flags[flags.index("--artifacts-uri") + 1] == FLAG
    assert ARTIFACTS_BUCKET_VARIABLE in env(job_api_for(api).worker_pod(spec))


@pytest.mark.parametrize("api", JOB_APIS)
def test_the_expanded_flag_is_the_runs_uri_in_the_bucket(api: str) -> None:
    spec = spec_for(api, with_artifacts(config_of("dev"), bucket=GIVEN_BUCKET))
    pod_env = env(job_api_for(api).worker_pod(spec))
    assert pod_env[ARTIFACTS_BUCKET_VARIABLE] == GIVEN_BUCKET
    expanded = [expand_references(part, pod_env) for part in trainer_flags(command_of(spec))]
    uri = parse_args(expanded).artifacts.uri
    assert uri is not None and S3Uri.parse(uri) == S3Uri(GIVEN_BUCKET, "fsdp-eks/dev/run-1")


def test_a_manifest_printed_before_the_bucket_exists_says_so() -> None:
    assert env(job_api_for(PYTORCHJOB).worker_pod(spec_for(PYTORCHJOB)))[ARTIFACTS_BUCKET_VARIABLE] == UNCREATED_BUCKET


def test_the_pods_call_aws_in_the_stacks_region() -> None:
    assert env(job_api_for(PYTORCHJOB).worker_pod(spec_for(PYTORCHJOB)))["AWS_REGION"] == config_of("dev").region


def test_expansion_follows_kubernetes_rules() -> None:
    assert expand_references("s3://$(B)/x", {"B": "b"}) == "s3://b/x"
    assert expand_references("$(UNSET)/x", {}) == "$(UNSET)/x"  # an undefined reference stays as written
    assert expand_references("$$(B)", {"B": "b"}) == "$(B)"  # $$ escapes the reference


def test_s3_checkpoint_every_and_resume_from_come_from_the_stacks_keys() -> None:
    config = with_artifacts(config_of("dev"), checkpoint_every=100)
    resume = "s3://old-bucket/fsdp-eks/dev/run-3/checkpoints"
    config = dataclasses.replace(config, job=dataclasses.replace(config.job, resume_from=resume))
    trainer = job_spec(config, IMAGE).trainer
    assert (trainer.artifacts.checkpoint_every, trainer.artifacts.resume_from) == (100, resume)
    assert job_spec(config_of("dev"), IMAGE).trainer.artifacts.checkpoint_every == 0  # default: every checkpoint


def test_the_run_counter_and_the_prefix_choose_the_runs_key() -> None:
    config = with_artifacts(config_of("dev"), prefix="teams/ml")
    config = dataclasses.replace(config, job=dataclasses.replace(config.job, run=7))
    spec = job_spec(config, IMAGE)
    assert spec.trainer.artifacts.uri == f"s3://{REFERENCE}/teams/ml/dev/run-7"
    assert (spec.artifacts.stack_key, spec.artifacts.run_key) == ("teams/ml/dev/", "teams/ml/dev/run-7/")


@cache
def deployed(api: str) -> ProgramRun:
    key = f"{NAMESPACE}:job"
    job = trainjob_raw_config("dev")[key] if api == TRAINJOB else raw_stack_config("dev")[key]
    run = run_program("dev", {key: job})
    assert run.error is None, run.error
    return run


def deployed_pod(run: ProgramRun, api: str) -> dict[str, Any]:
    if api == TRAINJOB:
        (runtime,) = run.of_type("kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime")
        (replicated,) = runtime.inputs["spec"]["template"]["spec"]["replicatedJobs"]
        return replicated["template"]["spec"]["template"]
    (job,) = run.of_type("kubernetes:kubeflow.org/v1:PyTorchJob")
    return job.inputs["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]


@pytest.mark.program
@pytest.mark.parametrize("api", JOB_APIS)
def test_the_deployed_pods_hold_the_created_buckets_name(api: str) -> None:
    run = deployed(api)
    (bucket,) = run.of_type("aws:s3/bucket:Bucket")
    assert env(deployed_pod(run, api))[ARTIFACTS_BUCKET_VARIABLE] == bucket.outputs["bucket"]
    assert run.outputs["artifactsUri"] == f"s3://{bucket.outputs['bucket']}/fsdp-eks/dev/run-1/"
