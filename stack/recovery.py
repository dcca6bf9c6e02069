"""What a crashed rank costs a stack's job in time, phase by phase: the model behind docs/job.md's fault table.

The phases are the ones the local hung-peer drill goes through and measures (docs/local.md: two pods of two workers,
one worker killed, its peers blocked as NCCL blocks them): the crashed node's agent stops its blocked workers, it
joins a new round and the other nodes' agents, seeing it wait, stop theirs; the workers start, run the fabric
preflight, build the model, read the checkpoint, compile, and take the first step. Here each phase is modelled for
the stack's own job from the code's settings and the sizing model, and the phases nothing here can measure (a GPU
node's process start, the model build on eight GPUs, a warm compile) are assumptions, named as such. The steps since
the last checkpoint are trained again on top (at most job.checkpointEvery of them).

Torch-free and pure: a StackConfig in, phases out.
"""

from __future__ import annotations

from dataclasses import dataclass

from sizing.throughput import expected_fabric
from stack.config import StackConfig
from stack.fit import stack_sizing, stack_storage
from trainer.base.flags.config import PreflightConfig
from trainer.base.hardware.fabric import GB, default_bytes, pair_rounds
from trainer.base.pod.shutdown import MAIN_THREAD_GRACE_S

# torch 2.13's dynamic rendezvous reads its state from the backend at most once a second (dynamic_rendezvous.py
# _BackendRendezvousStateHolder, cache_duration 1), and an agent's monitor loop asks for waiting nodes every
# --monitor-interval (0.1 s): the other nodes see the crashed one waiting within about a second of its join.
RENDEZVOUS_SYNC_S = 1.0
# Assumptions, not measurements (no GPU node in this project's tests): a worker's imports, CUDA context and NCCL's
# communicators on a p5 node; the meta model, its sharding and to_empty on eight GPUs; a compile whose cache is warm
# (TORCHINDUCTOR_CACHE_DIR on the run's file system, docs/job.md).
WORKER_START_S = 30.0
MODEL_BUILD_S = 15.0
WARM_COMPILE_S = 60.0


@dataclass(frozen=True)
class Phase:
    name: str
    seconds: float
    basis: str  # where the figure comes from: the code's setting, the sizing model, or an assumption


def preflight_seconds(config: PreflightConfig, nodes: int, intra_gb_per_s: float, inter_gb_per_s: float) -> float:
    """The fabric preflight's timed collectives (each level's warm-up and iterations of a buffer of its size, at the
    expected bus bandwidth; the pair level in its rounds): a lower bound, without its process groups' setup."""
    if config.mode == "off":
        return 0.0
    buffer = config.buffer_bytes or default_bytes("cuda")
    per_level = (config.iterations + 1) * buffer / GB
    intra = 2 * per_level / intra_gb_per_s if intra_gb_per_s else 0.0  # all-gather and reduce-scatter
    inter = (1 + len(pair_rounds(nodes))) * per_level / inter_gb_per_s if inter_gb_per_s and nodes > 1 else 0.0
    return intra + inter


def crash_recovery(config: StackConfig) -> list[Phase]:
    """The phases from the last step before a rank crashes to the first step after it, for the stack's job."""
    gpu, job = config.gpu_nodes, config.job
    fabric = expected_fabric(gpu.instance)
    storage, sizing = stack_storage(config), stack_sizing(config)
    throughput = sizing.throughput if sizing else None
    preflight = preflight_seconds(
        PreflightConfig(), gpu.count, fabric.intra_gb_per_s or 0.0, fabric.inter_rail_gb_per_s or 0.0
    )
    grace = (
        f"trainer/base/pod/shutdown.py MAIN_THREAD_GRACE_S: the watcher ends a blocked worker"
        f" {MAIN_THREAD_GRACE_S:g} s on"
    )
    return [
        Phase("the crashed node's agent stops its blocked workers", MAIN_THREAD_GRACE_S, grace),
        Phase("the other nodes see it waiting in the new round", RENDEZVOUS_SYNC_S, "torch's rendezvous state sync"),
        Phase("the other nodes' agents stop their blocked workers", MAIN_THREAD_GRACE_S, grace),
        Phase("the workers start: imports, CUDA, NCCL", WORKER_START_S, "assumed"),
        Phase("fabric preflight", preflight, "its collectives at the sizing model's bus bandwidth"),
        Phase("model build", MODEL_BUILD_S, "assumed"),
        Phase(
            "checkpoint read",
            storage.load_s if storage else 0.0,
            "sizing/fsx.py: the checkpoint at the file system's throughput" if storage else "no FSx: not modelled",
        ),
        Phase("compile (warm cache)", WARM_COMPILE_S if job.compile else 0.0, "assumed" if job.compile else "off"),
        Phase(
            "the first step",
            throughput.step_s if throughput else 0.0,
            "the sizing model's step time" if throughput else "not sized",
        ),
    ]


def steps_lost_s(config: StackConfig) -> float:
    """The most training a crash loses: the steps since the last checkpoint (job.checkpointEvery) at the modelled
    step time; 0 when the job cannot be sized."""
    sizing = stack_sizing(config)
    return config.job.checkpoint_every * sizing.throughput.step_s if sizing and sizing.throughput else 0.0
