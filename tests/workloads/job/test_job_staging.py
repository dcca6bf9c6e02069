"""The job stages its inputs once per run (the launcher's --stage-inputs in every pod's trainer container,
trainer/stage.py) and its workers run with the hub offline on what was staged, with the allocator, compile cache and
checkpoint settings of a real run."""

from __future__ import annotations

from typing import Any

import pytest

from stack.parse import parse_stack_config
from trainer.base.flags.config import parse_args
from trainer.base.pod.staging import split_launcher_options, staging_environment
from workloads.job.pod import trainer_args
from workloads.job.pytorchjob import pytorchjob_manifest
from workloads.job.spec import job_spec

from .job_stacks import IMAGE, STACKS, spec_of


def pod(manifest: dict[str, Any]) -> dict[str, Any]:
    return manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]


def env_values(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


@pytest.mark.parametrize("stack", STACKS)
def test_every_pod_stages_with_the_trainers_own_flags_before_the_trainer_starts(stack: str) -> None:
    spec = spec_of(stack)
    (trainer,) = pod(pytorchjob_manifest(spec))["containers"]
    options, _ = split_launcher_options(trainer["command"][3:])
    assert (
        options.stage_inputs
    )  # staged by the launcher, with the flags after `-m trainer` (trainer/base/pod/staging.py)
    assert parse_args(trainer["command"][trainer["command"].index("-m", 3) + 2 :]) == parse_args(trainer_args(spec))
    assert "HF_TOKEN" not in env_values(trainer)  # the launcher reads it from Secrets Manager before staging
    assert {"name": "checkpoints", "mountPath": "/checkpoints"} in trainer["volumeMounts"]


@pytest.mark.parametrize("stack", STACKS)
def test_staging_goes_online_while_the_workers_stay_offline(stack: str) -> None:
    worker_env = {k: str(v) for k, v in env_values(pod(pytorchjob_manifest(spec_of(stack)))["containers"][0]).items()}
    staging_env = staging_environment(worker_env)
    assert "HF_HUB_OFFLINE" not in staging_env and "HF_DATASETS_OFFLINE" not in staging_env
    assert staging_env["HF_HOME"] == worker_env["HF_HOME"]
    assert staging_env.get("HF_TOKEN_SECRET") == worker_env.get("HF_TOKEN_SECRET")


@pytest.mark.parametrize("stack", STACKS)
def test_workers_run_offline_on_the_staged_cache(stack: str) -> None:
    spec = spec_of(stack)
    worker_env = env_values(pod(pytorchjob_manifest(spec))["containers"][0])
    run_dir = spec.checkpoint.run_directory
    assert worker_env["HF_HUB_OFFLINE"] == "1" and worker_env["HF_DATASETS_OFFLINE"] == "1"
    assert worker_env["HF_HOME"] == f"{run_dir}/huggingface"
    config = parse_args(trainer_args(spec))
    assert config.data.cache_dir == f"{run_dir}/data-cache" and config.checkpoint.async_save


@pytest.mark.parametrize("stack", STACKS)
def test_workers_get_expandable_segments_and_a_shared_compile_cache(stack: str) -> None:
    spec = spec_of(stack)
    worker_env = env_values(pod(pytorchjob_manifest(spec))["containers"][0])
    assert worker_env["PYTORCH_ALLOC_CONF"] == "expandable_segments:True"
    assert worker_env["TORCHINDUCTOR_CACHE_DIR"] == f"{spec.checkpoint.run_directory}/compile-cache"


def test_the_checkpoint_timeout_follows_the_stacks_file_system() -> None:
    """A 70B job's save takes 11.8 min at 4800 GiB x 250 MB/s/TiB: the trainer waits up to 3 x that."""
    job = {"model": "meta-llama/Llama-2-70b-hf", "shardingStrategy": "FULL_SHARD", "activationCheckpointing": "full"}
    gpu = {"instanceType": "p5.48xlarge", "count": 16, "availabilityZone": "us-east-1a"}
    raw = {"aws:region": "us-east-1", "fsdp-eks:job": job, "fsdp-eks:gpuNodes": gpu}
    config = parse_stack_config({**raw, "fsdp-eks:storage": {"fsxCapacityGiB": 4800}}, "big")
    assert parse_args(trainer_args(job_spec(config, IMAGE))).checkpoint.timeout_minutes == 36
    dev = parse_args(trainer_args(spec_of("dev")))  # an emptyDir: the trainer's default
    assert dev.checkpoint.timeout_minutes == 30


@pytest.mark.parametrize("stack", STACKS)
def test_each_wait_after_sigterm_fits_inside_the_one_around_it(stack: str) -> None:
    """kubelet grace period > torchrun's wait for its workers > the trainer's wait for a background save."""
    manifest = pytorchjob_manifest(spec_of(stack))
    grace = pod(manifest)["terminationGracePeriodSeconds"]
    command = pod(manifest)["containers"][0]["command"]
    (shutdown,) = [int(arg.split("=", 1)[1]) for arg in command if arg.startswith("--shutdown-timeout=")]
    stop_wait = parse_args(trainer_args(spec_of(stack))).checkpoint.stop_wait_s
    assert 0 < stop_wait < shutdown < grace
