"""Joining the job: the device this rank uses and its process group (NCCL on CUDA, gloo on CPU)."""

from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist

from trainer.env import DistEnv

# Long enough for rank 0 to download a 70B checkpoint while the others wait in a barrier.
COLLECTIVE_TIMEOUT = timedelta(minutes=30)


def pick_device(device_type: str, env: DistEnv) -> torch.device:
    if device_type == "cuda":
        torch.cuda.set_device(env.local_rank)
        return torch.device("cuda", env.local_rank)
    return torch.device("cpu")


def init_distributed(env: DistEnv, device: torch.device) -> None:
    """Join the process group torchrun describes; a plain process joins a group of one (same code path after)."""
    backend = "nccl" if device.type == "cuda" else "gloo"
    device_id = device if device.type == "cuda" else None
    if env.launched:
        # torchrun's c10d rendezvous keeps one TCP store for all restarts of the workers, so the addresses the
        # previous attempt's ranks published would still be there: peers would connect to dead processes. Each
        # attempt therefore works under its own key prefix.
        store, rank, world_size = next(dist.rendezvous("env://", timeout=COLLECTIVE_TIMEOUT))
        store = dist.PrefixStore(f"trainer/attempt_{env.restart_count}", store)
        dist.init_process_group(
            backend, store=store, rank=rank, world_size=world_size, device_id=device_id, timeout=COLLECTIVE_TIMEOUT
        )
    else:
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, device_id=device_id)


def leave_distributed() -> None:
    dist.destroy_process_group()
