"""The job's inputs, staged once per run before the workers start, and what the workers then run with.

Every pod's `stage-inputs` init container runs `python -m trainer.stage` with the trainer's own flags: the first
to take the lock on the shared volume downloads the hub model and tokenises the data set into the run's directory,
the others wait and find them there (trainer/stage.py). The trainer containers then run with the hub offline, read
the weights from the staged Hugging Face cache and map the tokenised data (trainer/data_cache.py): no pod downloads
the weights itself, no rank calls the hub or tokenises. Pure functions of a JobSpec, like workloads/job/manifest.py.
"""

from __future__ import annotations

from typing import Any

from workloads.job.spec import CHECKPOINT_MOUNT, JobSpec

STAGE_CONTAINER = "stage-inputs"
# The caching allocator grows segments in place instead of reserving new fixed-size ones, which cuts the
# fragmentation that makes an FSDP job run out of memory with free memory in hand (PyTorch docs, "CUDA semantics:
# Optimizing memory usage with PYTORCH_CUDA_ALLOC_CONF"). torch 2.13's c10 reads PYTORCH_ALLOC_CONF, the name its
# docs now use (torch.cuda.memory.get_allocator_backend), and still the older PYTORCH_CUDA_ALLOC_CONF.
ALLOCATOR_CONFIG = "expandable_segments:True"


def hf_home(spec: JobSpec) -> str:
    """The Hugging Face cache of the run, on the checkpoint volume that every pod mounts."""
    return f"{spec.checkpoint.run_directory}/huggingface"


def compile_cache_dir(spec: JobSpec) -> str:
    """torch.compile's cache (TorchInductor's FX graph and Triton kernels): one compile per run, not per pod."""
    return f"{spec.checkpoint.run_directory}/compile-cache"


def worker_env(spec: JobSpec) -> list[dict[str, Any]]:
    """The trainer container's variables for staged inputs, memory and compilation."""
    return [
        {"name": "HF_HOME", "value": hf_home(spec)},
        {"name": "HF_HUB_OFFLINE", "value": "1"},  # everything is staged: a hub call would be a bug, so none is made
        {"name": "HF_DATASETS_OFFLINE", "value": "1"},
        {"name": "PYTORCH_ALLOC_CONF", "value": ALLOCATOR_CONFIG},
        {"name": "TORCHINDUCTOR_CACHE_DIR", "value": compile_cache_dir(spec)},
    ]


def stage_container(
    spec: JobSpec, trainer_args: list[str], token: dict[str, Any], resources: dict[str, Any]
) -> dict[str, Any]:
    """The init container that stages the run's inputs; `token` is the container's HF_TOKEN entry (from the Secret),
    `resources` the CPU and memory it may use (requests equal to limits, so the pod stays in Guaranteed QoS)."""
    return {
        "name": STAGE_CONTAINER,
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-m", "trainer.stage", *trainer_args],
        "env": [token, {"name": "HF_HOME", "value": hf_home(spec)}, {"name": "PYTHONUNBUFFERED", "value": "1"}],
        "resources": resources,
        "volumeMounts": [{"name": "checkpoints", "mountPath": CHECKPOINT_MOUNT}],
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }


def stage_resources(container_resources: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """The trainer container's CPU and memory, without its GPUs and EFA interfaces (an init container's requests
    count as max(init, app containers) when scheduling, so this asks for nothing more)."""
    kept = ("cpu", "memory")
    return {kind: {k: v for k, v in amounts.items() if k in kept} for kind, amounts in container_resources.items()}
