"""The job stages its inputs once per run (the stage-inputs init container, trainer/stage.py) and its workers run
with the hub offline on what was staged, with the allocator, compile cache and checkpoint settings of a real run."""

from __future__ import annotations

from typing import Any

import pytest

from stack.parse import parse_stack_config
from trainer.config import parse_args
from workloads.job.manifest import pytorchjob_manifest, trainer_args
from workloads.job.spec import job_spec
from workloads.job.staging import STAGE_CONTAINER

from .job_stacks import IMAGE, STACKS, spec_of


def pod(manifest: dict[str, Any]) -> dict[str, Any]:
    return manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]


def env_values(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


@pytest.mark.parametrize("stack", STACKS)
def test_every_pod_stages_with_the_trainers_own_flags_before_the_trainer_starts(stack: str) -> None:
    spec = spec_of(stack)
    spec_pod = pod(pytorchjob_manifest(spec))
    stage = spec_pod["initContainers"][-1]  # after prepare-checkpoints, which creates the run directory
    assert stage["name"] == STAGE_CONTAINER
    assert stage["command"][:3] == ["python", "-m", "trainer.stage"]
    assert parse_args(stage["command"][3:]) == parse_args(trainer_args(spec))
    assert {"name": "checkpoints", "mountPath": "/checkpoints"} in stage["volumeMounts"]
    trainer = spec_pod["containers"][0]
    assert env_values(stage)["HF_TOKEN"] == env_values(trainer)["HF_TOKEN"]  # from the Secret, never a value


@pytest.mark.parametrize("stack", STACKS)
def test_the_stage_container_asks_for_cpu_and_memory_only_and_keeps_the_pod_guaranteed(stack: str) -> None:
    spec_pod = pod(pytorchjob_manifest(spec_of(stack)))
    resources = spec_pod["initContainers"][-1]["resources"]
    assert resources["requests"] == resources["limits"]
    assert set(resources["limits"]) == {"cpu", "memory"}
    assert resources["limits"].items() <= spec_pod["containers"][0]["resources"]["limits"].items()


@pytest.mark.parametrize("stack", STACKS)
def test_workers_run_offline_on_the_staged_cache(stack: str) -> None:
    spec = spec_of(stack)
    spec_pod = pod(pytorchjob_manifest(spec))
    worker_env, stage_env = env_values(spec_pod["containers"][0]), env_values(spec_pod["initContainers"][-1])
    run_dir = spec.checkpoint.run_directory
    assert worker_env["HF_HUB_OFFLINE"] == "1" and worker_env["HF_DATASETS_OFFLINE"] == "1"
    assert worker_env["HF_HOME"] == stage_env["HF_HOME"] == f"{run_dir}/huggingface"
    assert "HF_HUB_OFFLINE" not in stage_env  # the stage step is the one that downloads
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
