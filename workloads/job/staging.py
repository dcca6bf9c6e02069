"""The job's inputs, staged once per run before the workers start, and what the workers then run with.

The launcher stages them in every pod's main container before torchrun starts (`python -m trainer.launch
--stage-inputs`, workloads/job/pytorchjob.py launcher_command): `python -m trainer.stage` with the trainer's own flags,
online, with the HF token from the Secret that the container already has; the first pod to take the lock on the shared
volume downloads the hub model and tokenises the data set into the run's directory, the others wait and find them
there (trainer/stage.py). The workers then run with the hub offline, read the weights from the staged Hugging Face
cache and map the tokenised data (trainer/data/cache.py): no pod downloads the weights itself, no rank calls the hub
or tokenises. Pure functions of a JobSpec, like workloads/job/pod.py.

Not an init container: the Training Operator reads exit codes from the `pytorch` container only (kubeflow/trainer
v1.9.4, pkg/controller.v1/common/pod.go ReconcilePods), and a pod failed by an init container reads as 0xbeef,
retryable under restartPolicy ExitCode: a gated model without a token created the pod again without end, holding every
GPU node. In the launcher the same failure is its exit 4 (trainer/base/pod/exits.py EXIT_STAGING_FAILED), which fails
the job with the reason on its last line. It also uses the container's CPU and memory, which it had to ask for again
as an init container, and leaves the pod in Guaranteed QoS with nothing more to keep equal.
"""

from __future__ import annotations

from typing import Any

from workloads.job.spec import JobSpec

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
        # Everything is staged: a hub call would be a bug, so none is made. The launcher's staging step, the one that
        # downloads, runs without these two (trainer/base/pod/staging.py staging_environment).
        {"name": "HF_HUB_OFFLINE", "value": "1"},
        {"name": "HF_DATASETS_OFFLINE", "value": "1"},
        {"name": "PYTORCH_ALLOC_CONF", "value": ALLOCATOR_CONFIG},
        {"name": "TORCHINDUCTOR_CACHE_DIR", "value": compile_cache_dir(spec)},
    ]
