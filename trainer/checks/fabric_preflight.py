"""The fabric preflight: before the model is loaded, time the collectives training runs, within each node and across
nodes, and take a node whose links are too slow out of the job (trainer/base/hardware/fabric.py holds the formulas and
the verdict).

Called once per start of the workers by trainer/main.py, before the training run joins its process group: a bad node
costs seconds, not a model load. The preflight forms a process group of its own (the same backend, its own key prefix
in the workers' store) and destroys it before training forms its own. It times, with buffers of --preflight-bytes and
--preflight-iterations timed iterations after one warm-up:
- within each node (LOCAL_WORLD_SIZE consecutive ranks, as torchrun assigns them: torch 2.13
  elastic/agent/server/api.py SimpleElasticAgent._assign_worker_ranks, node n's workers from n x LOCAL_WORLD_SIZE;
  dist.new_subgroups): all-gather and reduce-scatter, FSDP's two collectives, every node at once;
- across nodes on each rail (the ranks with the same local rank; dist.new_subgroups_by_enumeration): all-reduce,
  HYBRID_SHARD's, every rail at once;
- across nodes in pairs (fabric.pair_rounds; send/receive between the pair's ranks of each rail), which names the node
  when its network is slow (the rails' ring cannot: every node finishes it at the same time).
Every rank's timings reach every rank (all_gather_object), so each reaches the same verdict (fabric.judge) with no
broadcast. A bad node's workers exit EXIT_BAD_NODE: the launcher ends with it, retryable, without spending torchrun's
restarts or closing the rendezvous; the other nodes' workers exit EXIT_PEER_BAD_NODE, which their agents restart
without counting into a new round without the bad node (trainer/launch/agent.py, exits.py): the elastic job goes on
with the nodes it has when --nnodes allows, or waits for the bad node's pod, created again, on another node.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from trainer.base.faults import preflight_delay_s
from trainer.base.flags.config import TrainConfig
from trainer.base.hardware.fabric import (
    COLLECTIVE_OF_LEVEL,
    INTER_ALL_REDUCE,
    INTER_PAIRS,
    INTRA_ALL_GATHER,
    INTRA_LEVELS,
    INTRA_REDUCE_SCATTER,
    Verdict,
    bus_bandwidth_gb_per_s,
    default_bytes,
    describe,
    figure_lines,
    judge,
    median_pair_figures,
    node_name,
    pair_of,
    pair_rounds,
)
from trainer.base.metrics.figures import append_record, preflight_failure_record, set_start_figures
from trainer.base.pod.env import DistEnv
from trainer.base.pod.exits import EXIT_BAD_NODE, EXIT_PEER_BAD_NODE
from trainer.comms.collectives import all_gather_single, reduce_scatter_single
from trainer.comms.distributed import pick_device

log = logging.getLogger(__name__)

# The preflight's keys in the workers' store, apart from training's (trainer/comms/distributed.py init_distributed
# uses trainer/attempt_<id>): two default groups of one start must not read each other's addresses.
STORE_PREFIX = "trainer/attempt_{attempt}/preflight"
# The store the preflight joined, kept for the life of the process: on rank 0 it serves the TCP store (torch's env://
# rendezvous without the agent's store, torch/distributed/rendezvous.py _create_c10d_store, multi_tenant=True), which
# training's rendezvous then shares in this process instead of binding the port again while peers may still be
# connected to the first server.
_kept_stores: list[dist.Store] = []


@dataclass(frozen=True)
class Topology:
    """Where the ranks sit: `nodes` of `per_node` consecutive ranks (torchrun's assignment)."""

    nodes: int
    per_node: int

    def node_of(self, rank: int) -> int:
        return rank // self.per_node

    def local_of(self, rank: int) -> int:
        return rank % self.per_node


@dataclass(frozen=True)
class RankTimings:
    """One rank's seconds per iteration, per level (and per pair round); what every rank gathers."""

    rank: int
    node: int
    name: str
    levels: dict[str, float]
    pairs: dict[int, float]
    """Round index (fabric.pair_rounds) -> seconds, for the rounds this rank's node took part in."""


def topology(env: DistEnv) -> Topology | None:
    """The job's nodes, or None when the ranks are not spread evenly (nothing to compare node by node); every rank
    decides alike (DistEnv.even_nodes), or some would wait in the preflight's collectives for others that skip it."""
    nodes = env.even_nodes
    return Topology(nodes, env.local_world_size) if nodes else None


@contextmanager
def preflight_world(env: DistEnv, device: torch.device, timeout: timedelta, wait: timedelta) -> Iterator[None]:
    """A default process group of the job's ranks for the preflight alone, destroyed on the way out."""
    backend = "nccl" if device.type == "cuda" else "gloo"
    store, rank, world_size = next(dist.rendezvous("env://", timeout=wait))
    _kept_stores.append(store)
    prefixed = dist.PrefixStore(STORE_PREFIX.format(attempt=env.attempt), store)
    device_id = device if device.type == "cuda" else None
    dist.init_process_group(
        backend, store=prefixed, rank=rank, world_size=world_size, device_id=device_id, timeout=timeout
    )
    try:
        yield
    finally:
        dist.destroy_process_group()
        if device.type == "cuda":
            # The buffers are the preflight's: training's memory figures (peak_memory_bytes, peak_reserved_bytes in the
            # metrics, which sizing is checked against) start from what training itself holds.
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(operation: Callable[[], object], iterations: int, device: torch.device) -> float:
    """Seconds per iteration of `operation`, a collective, after one untimed warm-up that also lines the group up.
    The slow_preflight fault (trainer/base/faults.py) waits before each timed iteration, inside the timing."""
    delay = preflight_delay_s()
    operation()
    synchronize(device)
    start = time.perf_counter()
    for _ in range(iterations):
        if delay:
            time.sleep(delay)
        operation()
    synchronize(device)
    return (time.perf_counter() - start) / iterations


def elements(total_bytes: int, ranks: int) -> int:
    """fp32 elements per rank's share of a `total_bytes` buffer split `ranks` ways (at least one)."""
    return max(1, total_bytes // 4 // ranks)


def time_intra(config: TrainConfig, topo: Topology, device: torch.device, total: int) -> dict[str, float]:
    """All-gather and reduce-scatter within each node, every node at once (every rank creates every group)."""
    group, _ = dist.new_subgroups(group_size=topo.per_node)
    share = elements(total, topo.per_node)
    shard = torch.ones(share, device=device)
    full = torch.empty(share * topo.per_node, device=device)
    iterations = config.preflight.iterations
    return {
        INTRA_ALL_GATHER: timed(lambda: all_gather_single(full, shard, group), iterations, device),
        INTRA_REDUCE_SCATTER: timed(lambda: reduce_scatter_single(shard, full, group), iterations, device),
    }


def time_rails(config: TrainConfig, topo: Topology, device: torch.device, total: int) -> dict[str, float]:
    """All-reduce across nodes on each rail, every rail at once."""
    rails = [[node * topo.per_node + local for node in range(topo.nodes)] for local in range(topo.per_node)]
    group, _ = dist.new_subgroups_by_enumeration(rails)
    buffer = torch.ones(elements(total, 1), device=device)
    return {INTER_ALL_REDUCE: timed(lambda: dist.all_reduce(buffer, group=group), config.preflight.iterations, device)}


def time_pairs(config: TrainConfig, topo: Topology, rank: int, device: torch.device, total: int) -> dict[int, float]:
    """Send/receive between the same local rank of two nodes, every rail at once, one pair of nodes per round."""
    # torch's batch_isend_irecv: a group's first P2P batch must involve every rank, or NCCL's behaviour is undefined.
    dist.barrier()
    node, local = topo.node_of(rank), topo.local_of(rank)
    sent = torch.ones(elements(total, 1), device=device)
    received = torch.empty_like(sent)
    timings: dict[int, float] = {}
    for index, round_pairs in enumerate(pair_rounds(topo.nodes)):
        pair = pair_of(round_pairs, node)
        if pair is None:
            continue
        a, b = pair
        peer = (b if node == a else a) * topo.per_node + local

        def exchange(peer: int = peer) -> None:
            operations = [dist.P2POp(dist.isend, sent, peer), dist.P2POp(dist.irecv, received, peer)]
            for request in dist.batch_isend_irecv(operations):
                request.wait()

        timings[index] = timed(exchange, config.preflight.iterations, device)
    return timings


def measure(config: TrainConfig, env: DistEnv, topo: Topology, device: torch.device) -> RankTimings:
    """This rank's timings at every level the job's shape has (every rank calls this: creating groups is collective)."""
    total = config.preflight.buffer_bytes or default_bytes(device.type)
    levels: dict[str, float] = {}
    pairs: dict[int, float] = {}
    if topo.per_node > 1:
        levels |= time_intra(config, topo, device, total)
    if topo.nodes > 1:
        levels |= time_rails(config, topo, device, total)
    if topo.nodes > 2:  # two nodes have one pair, which cannot say which end is slow (trainer/base/hardware/fabric.py)
        pairs = time_pairs(config, topo, env.rank, device, total)
    return RankTimings(env.rank, topo.node_of(env.rank), node_name(), levels, pairs)


def node_figures(timings: list[RankTimings], topo: Topology, total: int) -> dict[str, dict[int, float]]:
    """Each node's bus bandwidth (GB/s) per level, from its slowest rank's time (pairs: fabric.median_pair_figures)."""
    slowest: dict[str, dict[int, float]] = {}
    for timing in timings:
        for level, seconds in timing.levels.items():
            by_node = slowest.setdefault(level, {})
            by_node[timing.node] = max(by_node.get(timing.node, 0.0), seconds)
    ranks = {level: topo.per_node if level in INTRA_LEVELS else topo.nodes for level in slowest}
    figures = {
        level: {
            node: bus_bandwidth_gb_per_s(COLLECTIVE_OF_LEVEL[level], total, seconds, ranks[level])
            for node, seconds in by_node.items()
        }
        for level, by_node in slowest.items()
    }
    rounds = pair_rounds(topo.nodes)
    pair_seconds: dict[tuple[int, int], float] = {}
    for timing in timings:
        for index, seconds in timing.pairs.items():
            pair = pair_of(rounds[index], timing.node)
            if pair is not None:
                pair_seconds[pair] = max(pair_seconds.get(pair, 0.0), seconds)
    if pair_seconds:
        pair_figures = {
            pair: bus_bandwidth_gb_per_s(COLLECTIVE_OF_LEVEL[INTER_PAIRS], total, seconds, 2)
            for pair, seconds in pair_seconds.items()
        }
        figures[INTER_PAIRS] = median_pair_figures(pair_figures, topo.nodes)
    return figures


def expectations(config: TrainConfig) -> dict[str, float | None]:
    intra = config.preflight.expect_intra_gb_per_s or None
    inter = config.preflight.expect_inter_gb_per_s or None
    return {INTRA_ALL_GATHER: intra, INTRA_REDUCE_SCATTER: intra, INTER_ALL_REDUCE: inter, INTER_PAIRS: inter}


def start_figures(figures: dict[str, dict[int, float]], config: TrainConfig, verdict: Verdict) -> dict[str, float]:
    """The metrics' preflight fields (trainer/base/metrics/figures.py): each level's slowest node's figure, the
    expectations."""
    values: dict[str, float] = {
        f"preflight_{level}_gb_per_s": min(figures[level].values())
        for level in (INTRA_ALL_GATHER, INTRA_REDUCE_SCATTER, INTER_ALL_REDUCE)
        if figures.get(level)
    }
    if config.preflight.expect_intra_gb_per_s:
        values["preflight_expected_intra_gb_per_s"] = config.preflight.expect_intra_gb_per_s
    if config.preflight.expect_inter_gb_per_s:
        values["preflight_expected_inter_gb_per_s"] = config.preflight.expect_inter_gb_per_s
    if verdict.slowest_fraction is not None:
        values["preflight_slowest_fraction"] = verdict.slowest_fraction
    return values


def log_outcome(figures: dict[str, dict[int, float]], verdict: Verdict, names: dict[int, str]) -> None:
    for line in figure_lines(figures, names):
        log.info("fabric preflight %s", line)
    for line in describe(verdict, names):
        log.warning("fabric preflight: %s", line)


def exit_code(verdict: Verdict, node: int, names: dict[int, str]) -> int:
    """0 to train on; EXIT_BAD_NODE on a bad node's ranks; EXIT_PEER_BAD_NODE on the others' when a node is bad."""
    if not verdict.bad_nodes:
        return 0
    bad = ", ".join(f"node {n} ({names.get(n, '?')})" for n in verdict.bad_nodes)
    if node in verdict.bad_nodes:
        log.error("fabric preflight: this node, %s, is too slow to train on: it leaves the job", names.get(node, "?"))
        return EXIT_BAD_NODE
    log.warning("fabric preflight: %s failed; this node's workers stop to re-form the job without it", bad)
    return EXIT_PEER_BAD_NODE


def fabric_preflight(config: TrainConfig, env: DistEnv, device_type: str) -> int:
    """Run the preflight when it applies (--preflight on, more than one rank, ranks spread evenly over the nodes);
    the worker's exit code when a node failed it, else 0. Every rank calls this."""
    topo = topology(env)
    if config.preflight.mode == "off" or not env.launched or topo is None:
        return 0
    started = time.perf_counter()
    device = pick_device(device_type, env)
    timeout = timedelta(minutes=config.parallel.timeout_minutes)
    wait = timedelta(minutes=config.checkpoint.timeout_minutes)
    with preflight_world(env, device, timeout, wait):
        mine = measure(config, env, topo, device)
        gathered: list[Any] = [None] * env.world_size
        dist.all_gather_object(gathered, mine)
        dist.barrier()  # leave together: gloo aborts a process whose peer tears its connections down mid-collective
    timings: list[RankTimings] = gathered
    total = config.preflight.buffer_bytes or default_bytes(device.type)
    figures = node_figures(timings, topo, total)
    verdict = judge(figures, expectations(config), config.preflight.min_fraction)
    names = {timing.node: timing.name for timing in timings}
    if env.is_leader:
        log_outcome(figures, verdict, names)
        log.info("fabric preflight: %d nodes of %d ranks in %.2f s", topo.nodes, topo.per_node,
                 time.perf_counter() - started)  # fmt: skip
    values = start_figures(figures, config, verdict)
    set_start_figures(values)
    if verdict.bad_nodes and env.is_leader and config.metrics.file:
        # Rank 0 alone, as MetricsSink: the failed start is one line of the metrics file. No Prometheus endpoint: the
        # workers exit within milliseconds, before any scrape could read it.
        bad = [f"{names.get(node, '?')} (node {node})" for node in verdict.bad_nodes]
        append_record(config.metrics.file, preflight_failure_record(values, bad, env.world_size, env.group_restarts))
    return exit_code(verdict, topo.node_of(env.rank), names)
