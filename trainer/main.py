"""Entry point: parse, validate (before any work), then train.

    python -m trainer --model tiny --device cpu --steps 20                         # one process
    torchrun --standalone --nproc-per-node 2 -m trainer --model tiny --device cpu  # two processes, gloo
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend etcd-v2 --rdzv-endpoint HOST:2379 --rdzv-id JOB \\
        -m trainer --model meta-llama/Llama-2-7b-hf --dataset knkarthick/dialogsum \\
        --sharding-strategy HYBRID_SHARD --checkpoint-dir /fsx/ckpt                  # two nodes of 8 GPUs
"""

from __future__ import annotations

import logging
import sys

from trainer.base.errors import InputError, StorageError
from trainer.base.flags.config import parse_args
from trainer.base.model.source import resolve_model
from trainer.base.pod.env import DistEnv, read_env
from trainer.base.pod.exits import EXIT_BAD_INPUT, EXIT_NO_SPACE, EXIT_PERMANENT
from trainer.validate import validate

log = logging.getLogger("trainer")


def configure_logging(env: DistEnv) -> None:
    """Rank 0 logs human-readable progress; the other ranks only warnings and errors."""
    logging.basicConfig(
        level=logging.INFO if env.is_leader else logging.WARNING,
        format=f"%(asctime)s [rank {env.rank}] %(message)s",
        stream=sys.stderr,
    )


def refuse(errors: list[str], env: DistEnv) -> int:
    # Every rank says why, not rank 0 alone: torchrun stops a worker's peers as soon as one of them exits, so rank 0
    # is often killed before it prints when another rank refuses first. The rank names whose log line it is.
    where = "" if env.is_leader else f" (rank {env.rank})"
    for error in errors:
        print(f"python -m trainer: error: {error}{where}", file=sys.stderr)
    return EXIT_BAD_INPUT  # final: the launcher restarts no worker for it (exits.py FINAL_WORKER_EXITS)


def resolve_device(requested: str) -> str:
    """The device type for --device: cuda, cpu, or 'unavailable' when cuda is asked for but absent."""
    if requested == "cpu":
        return "cpu"  # without importing torch: a refused CPU run stays quick
    import torch

    available = torch.cuda.is_available()
    if requested == "cuda":
        return "cuda" if available else "unavailable"  # validate() refuses it with a message
    return "cuda" if available else "cpu"


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    try:
        env = read_env()
    except InputError as error:  # a multi-node run without the launcher's attempt id (trainer/base/pod/attempt.py)
        return refuse([str(error)], DistEnv())
    configure_logging(env)
    try:
        # An s3:// model as staged into --data-cache-dir: the workers never download it (trainer/base/s3/inputs.py).
        source = resolve_model(config.model.name, config.data.cache_dir, offline=True)
    except InputError as error:
        return refuse([str(error)], env)
    device_type = resolve_device(config.parallel.device)
    errors = validate(config, env, device_type, source)
    if errors:
        return refuse(errors, env)
    from trainer.checkpoint.durable import DurableSaveError  # torch: after validation, as trainer.train
    from trainer.checks.fabric_preflight import fabric_preflight
    from trainer.train import run

    # Before the data and the model: a node whose links are too slow leaves the job in seconds
    # (trainer/checks/fabric_preflight.py).
    preflight_exit = fabric_preflight(config, env, device_type)
    if preflight_exit:
        return preflight_exit
    try:
        run(config, env, source, device_type)
    except DurableSaveError as error:
        # Not final: the group's restart finds the last step on FSx and writes it to S3 again.
        refuse([str(error)], env)
        return EXIT_PERMANENT
    except InputError as error:
        return refuse([str(error)], env)
    except StorageError as error:
        refuse([str(error)], env)
        return EXIT_NO_SPACE
    return 0
