"""The stack's config, changed only where this machine needs it, before the job is rendered.

The changes are made to the stack file's raw config, so that the stack's own validation (stack/config.py) and the
stack's own job builders (workloads/job/api.py) see them exactly as they would see a real stack: a local run can
never render a job the stack would refuse. Each change is recorded with its reason and printed before the run.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from local.apis import local_api_for
from local.options import LocalJobOptions, Override
from stack.config import StackConfig
from stack.fields import NAMESPACE
from stack.files import raw_stack_config
from stack.parse import parse_stack_config
from trainer.base.s3.uri import is_s3_uri

LOCAL_MODEL = "tiny"  # the preset built for several CPU processes on a 2-core machine (trainer/base/model/presets.py)
MAX_LOCAL_SEQ_LEN = 256
# Agents on one machine: each is a full torchrun with its own workers. Two show a real multi-node rendezvous and
# an elastic shrink; more only slow a laptop down.
DEFAULT_LOCAL_NODES = 2
MAX_LOCAL_NODES = 4
MAX_LOCAL_WORKERS_PER_NODE = 4  # siblings per agent: enough for a node's shape; more only slow a laptop down
SYNTHETIC = "synthetic"
LOCAL_CHECKPOINT_CLAIM = "local-checkpoints"


def _is_local_dataset(dataset: str) -> bool:
    """A data set this machine can stage: generated, a local file, or an s3:// object in the run's local S3 API
    (put there with --s3-upload; one that is not there fails staging, as on the cluster)."""
    return dataset == SYNTHETIC or is_s3_uri(dataset) or Path(dataset).expanduser().exists()


def batch_multiple(min_nodes: int, nodes: int) -> int:
    """The smallest global batch, in per-rank batches, that divides evenly at every node count min..nodes: the
    trainer keeps the global batch fixed when an elastic job shrinks, by accumulating gradients."""
    return math.lcm(*range(min_nodes, nodes + 1))


def local_job_settings(config: StackConfig, options: LocalJobOptions) -> tuple[dict[str, Any], list[Override]]:
    """The job and gpuNodes keys to change for this machine, and the list of changes to show the user."""
    job, gpu = config.job, config.gpu_nodes
    overrides: list[Override] = []
    job_keys: dict[str, Any] = {}
    gpu_keys: dict[str, Any] = {}

    def change(section: dict[str, Any], key: str, old: Any, new: Any, reason: str, where: str) -> None:
        if new != old:
            section[key] = new
            overrides.append(Override(f"{where}.{key}", old, new, reason))

    if options.api is not None:
        change(job_keys, "api", job.api, options.api, "--api", "job")
    api = options.api or job.api
    nodes = options.nodes or min(gpu.count, DEFAULT_LOCAL_NODES)
    change(gpu_keys, "count", gpu.count, nodes, "worker replicas (one torchrun agent each) on this machine", "gpuNodes")
    min_nodes = options.min_nodes or min(job.min_nodes or nodes, nodes)
    if min_nodes != (job.min_nodes or nodes):  # job_spec's default is every node
        change(job_keys, "minNodes", job.min_nodes, min_nodes, "elastic range of the local agents", "job")
    if options.global_batch_size is not None:
        reason = "the global batch of the job it takes over"
        change(job_keys, "globalBatchSize", job.global_batch_size, options.global_batch_size, reason, "job")
    elif min_nodes < nodes and job.global_batch_size is None:
        # the stack's rule for elastic jobs: a fixed global batch that divides at every node count
        # the cluster's ranks per node and this machine's alike: the stack checks the one, the trainer the other
        per_node = (options.batch_size or job.batch_size) * math.lcm(gpu.instance.gpus, options.nproc_per_node)
        change(job_keys, "globalBatchSize", None, per_node * batch_multiple(min_nodes, nodes), "elastic job", "job")
    if nodes > 1 and not config.storage.fsx and job.checkpoint_claim is None:
        # the stack's rule: several nodes need one ReadWriteMany checkpoint volume; here it is one local directory
        reason = "all local agents share one checkpoint directory"
        change(job_keys, "checkpointClaim", None, LOCAL_CHECKPOINT_CLAIM, reason, "job")
    model = options.model or LOCAL_MODEL
    change(job_keys, "model", job.model, model, "small enough for CPU processes", "job")
    if model == LOCAL_MODEL and job.seq_len > MAX_LOCAL_SEQ_LEN:
        change(job_keys, "seqLen", job.seq_len, MAX_LOCAL_SEQ_LEN, "short sequences keep CPU steps fast", "job")
    dataset = options.dataset or (job.dataset if _is_local_dataset(job.dataset) else SYNTHETIC)
    reason = "no download: a local file, generated text or the local S3 API"
    change(job_keys, "dataset", job.dataset, dataset, reason, "job")
    # bf16/fp16 compute on a CPU is slow or emulated, and fp32 keeps an elastic run's loss equal to an unbroken one
    change(job_keys, "mixedPrecision", job.mixed_precision, "fp32", "CPU", "job")
    change(job_keys, "compile", job.compile, False, "torch.compile on CPU needs a C++ toolchain and minutes", "job")
    # What the job's API runs here in place of the stack's (local/api.py LocalJobApi.job_changes): its rendezvous.
    for c in local_api_for(api).job_changes(job, options):
        change(job_keys, c.key, c.stack_value, c.local_value, c.reason, "job")
    if options.batch_size is not None:
        change(
            job_keys, "batchSize", job.batch_size, options.batch_size, "a share of the global batch per worker", "job"
        )
    if options.max_restarts is not None:
        change(job_keys, "maxRestarts", job.max_restarts, options.max_restarts, "--max-restarts", "job")
    if options.max_disruption_restarts is not None:
        value, reason = options.max_disruption_restarts, "--max-disruption-restarts"
        change(job_keys, "maxDisruptionRestarts", job.max_disruption_restarts, value, reason, "job")
    if options.steps is not None:
        change(job_keys, "steps", job.steps, options.steps, "--steps", "job")
    if options.checkpoint_every is not None:
        change(job_keys, "checkpointEvery", job.checkpoint_every, options.checkpoint_every, "--checkpoint-every", "job")
    elif options.steps is not None and options.steps < job.checkpoint_every:
        change(job_keys, "checkpointEvery", job.checkpoint_every, options.steps, "at most --steps", "job")
    return {"job": job_keys, "gpuNodes": gpu_keys}, overrides


def _merged(raw: dict[str, Any], section: str, changes: dict[str, Any]) -> dict[str, Any]:
    key = f"{NAMESPACE}:{section}"
    value = raw.get(key) or {}
    current = json.loads(value) if isinstance(value, str) else dict(value)
    return {**current, **changes}


def local_stack_config(stack: str, options: LocalJobOptions) -> tuple[StackConfig, list[Override]]:
    """The stack's config with the local changes applied and validated again by the stack's own rules.

    Raises FileNotFoundError (unknown stack, naming the known ones) or infra's ConfigError."""
    raw = raw_stack_config(stack)
    changes, overrides = local_job_settings(parse_stack_config(raw, stack), options)
    for section, keys in changes.items():
        if keys:
            raw[f"{NAMESPACE}:{section}"] = _merged(raw, section, keys)
    return parse_stack_config(raw, stack), overrides
