"""The fabric preflight's arithmetic and verdict, without torch: bus bandwidth from a timing, each node's figure per
level, and which node, if any, is too slow to train on (trainer/checks/fabric_preflight.py measures; sizing/ and the
dashboards read the figures).

Bus bandwidth follows nccl-tests (doc/PERFORMANCE.md, NVIDIA/nccl-tests): algbw = S / t, with S the bytes of the
whole array (an all-gather's output, a reduce-scatter's input, an all-reduce's buffer); busbw = algbw x (n-1)/n for
all-gather and reduce-scatter, algbw x 2(n-1)/n for all-reduce, and algbw for a send/receive. busbw is comparable
with the hardware's one-direction link speed whatever the number of ranks, which is what the expectation is.

A node's figure at a level:
- within a node (all-gather, reduce-scatter over the node's LOCAL_WORLD_SIZE ranks): the node's own group, timed by
  its slowest rank, so a slow NVLink or GPU shows on that node alone;
- across nodes on the rails (all-reduce of the ranks with the same local rank on every node, every rail at once): one
  ring over all nodes, which every node finishes at the same time, so it says how fast the fabric is, never which
  node slows it;
- across nodes in pairs (a send/receive between two nodes on every rail at once): a cyclic schedule, node k with nodes
  k+1 and k+2 (mod n), so each node has up to four partners, none of them special, and the pairs that share no node
  run in the same round (about 4 rounds whatever n, where comparing every node with nodes 0 and 1 took 2n-3 rounds and
  saw nothing when both were slow). A node's figure is the (upper) median of its pairs': a slow node slows every pair
  it is in, a healthy node at most the pairs it shares with slow neighbours, so a healthy node next to one (or two
  non-adjacent) slow nodes keeps a fast median. With two nodes there is one pair only, and it cannot say which end is
  slow (no node is named at this level).

A node fails a level when its figure is below `min_fraction` of the median node's, or of the expected figure (the
catalog's, passed in as flags). A shortfall against the expectation names nodes only where at most half of the nodes
fall short: when most do, the expectation or the fabric's configuration is what is wrong, and excluding nodes for it
would stop every job (it is logged instead).
"""

from __future__ import annotations

import os
import socket
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field

from trainer.base.flags.config import PreflightConfig

# The pod's node, from the downward API (spec.nodeName; workloads/job/ sets it); outside a pod, the host's name.
NODE_NAME_ENV = "NODE_NAME"
GB = 1e9  # nccl-tests report GB/s of 1e9 bytes

INTRA_ALL_GATHER = "intra_all_gather"
INTRA_REDUCE_SCATTER = "intra_reduce_scatter"
INTER_ALL_REDUCE = "inter_all_reduce"
INTER_PAIRS = "inter_pairs"
LEVELS = (INTRA_ALL_GATHER, INTRA_REDUCE_SCATTER, INTER_ALL_REDUCE, INTER_PAIRS)
INTRA_LEVELS = (INTRA_ALL_GATHER, INTRA_REDUCE_SCATTER)
# nccl-tests' correction from algbw to busbw, per collective: n -> factor.
COLLECTIVE_OF_LEVEL = {
    INTRA_ALL_GATHER: "all_gather",
    INTRA_REDUCE_SCATTER: "reduce_scatter",
    INTER_ALL_REDUCE: "all_reduce",
    INTER_PAIRS: "send_recv",
}


def bus_factor(collective: str, ranks: int) -> float:
    """nccl-tests' busbw / algbw for `collective` over `ranks` (PERFORMANCE.md, "Summary")."""
    if collective in ("all_gather", "reduce_scatter"):
        return (ranks - 1) / ranks
    if collective == "all_reduce":
        return 2 * (ranks - 1) / ranks
    if collective == "send_recv":
        return 1.0
    raise ValueError(f"unknown collective {collective!r}")


def bus_bandwidth_gb_per_s(collective: str, total_bytes: int, seconds: float, ranks: int) -> float:
    """Bus bandwidth in GB/s of one `collective` of `total_bytes` (the whole array) over `ranks` taking `seconds`."""
    if seconds <= 0:
        raise ValueError(f"a collective cannot take {seconds} s")
    return total_bytes / seconds * bus_factor(collective, ranks) / GB


def node_name(environ: Mapping[str, str] | None = None) -> str:
    """This pod's node (NODE_NAME), else the host's name."""
    environ = os.environ if environ is None else environ
    return environ.get(NODE_NAME_ENV) or socket.gethostname()


def default_bytes(device_type: str) -> int:
    """--preflight-bytes when not given: 256 MiB on a GPU, where nccl-tests reach the links' plateau and a layer's
    all-gather of a 7B-70B model lies (0.4-1.7 GB in bf16), and 1 MiB on the CPU, where gloo only shows the wiring."""
    return 256 * 2**20 if device_type == "cuda" else 2**20


@dataclass(frozen=True)
class Shortfall:
    """One node below its level's threshold."""

    level: str
    node: int
    figure: float
    """The node's bus bandwidth, GB/s."""
    reference: float
    """What it was held against: the median node's or the expected figure, GB/s."""
    against: str
    """"median" or "expected"."""

    @property
    def fraction(self) -> float:
        return self.figure / self.reference


@dataclass(frozen=True)
class Verdict:
    """The preflight's outcome, alike on every rank."""

    bad_nodes: tuple[int, ...]
    """Node indexes (rank // LOCAL_WORLD_SIZE) that are to leave the job."""
    shortfalls: tuple[Shortfall, ...]
    """Every node below a threshold, named or not."""
    slowest_fraction: float | None
    """The lowest over levels of the slowest node's figure over the expected (where given) or the median figure."""
    warnings: tuple[str, ...] = field(default=())
    """Shortfalls that name no node (most nodes below the expectation, or two nodes' one pair)."""


def median_shortfalls(level: str, figures: Mapping[int, float], min_fraction: float) -> list[Shortfall]:
    """The nodes below `min_fraction` of the median node (nothing to compare with one node)."""
    if len(figures) < 2:
        return []
    median = statistics.median(figures.values())
    return [
        Shortfall(level, node, figure, median, "median")
        for node, figure in sorted(figures.items())
        if figure < min_fraction * median
    ]


def expected_shortfalls(
    level: str, figures: Mapping[int, float], expected: float | None, min_fraction: float
) -> list[Shortfall]:
    if not expected:
        return []
    return [
        Shortfall(level, node, figure, expected, "expected")
        for node, figure in sorted(figures.items())
        if figure < min_fraction * expected
    ]


def names_nodes(level: str, nodes: int) -> bool:
    """Whether `level`'s figures can say which of `nodes` nodes is slow (not the rails' ring, nor one pair)."""
    return level != INTER_ALL_REDUCE and not (level == INTER_PAIRS and nodes < 3)


def judge(
    figures: Mapping[str, Mapping[int, float]], expected: Mapping[str, float | None], min_fraction: float
) -> Verdict:
    """The verdict on the nodes' figures per level (GB/s; `expected` per level, None or 0 where unknown)."""
    bad: set[int] = set()
    shortfalls: list[Shortfall] = []
    warnings: list[str] = []
    fractions: list[float] = []
    for level, by_node in figures.items():
        if not by_node:
            continue
        relative = median_shortfalls(level, by_node, min_fraction)
        absolute = expected_shortfalls(level, by_node, expected.get(level), min_fraction)
        shortfalls += relative + absolute
        if not names_nodes(level, len(by_node)):
            if relative or absolute:
                warnings.append(f"{level}: below the threshold, but this level cannot say which node is slow")
        else:
            bad.update(s.node for s in relative)
            if absolute and 2 * len(absolute) <= len(by_node):
                bad.update(s.node for s in absolute)
            elif absolute:
                warnings.append(
                    f"{level}: {len(absolute)} of {len(by_node)} nodes below {min_fraction:g} of the expected "
                    f"{expected.get(level):.3g} GB/s: the expectation or the fabric's configuration, not a node"
                )
        reference = expected.get(level) or statistics.median(by_node.values())
        fractions.append(min(by_node.values()) / reference)
    return Verdict(tuple(sorted(bad)), tuple(shortfalls), min(fractions) if fractions else None, tuple(warnings))


def node_pairs(nodes: int) -> list[tuple[int, int]]:
    """Each node k with k+1 and k+2 (mod `nodes`), every pair once, smaller node first, in that order."""
    pairs: list[tuple[int, int]] = []
    for step in (1, 2):
        for k in range(nodes):
            other = (k + step) % nodes
            pair = (min(k, other), max(k, other))
            if k != other and pair not in pairs:
                pairs.append(pair)
    return pairs


def pair_rounds(nodes: int) -> list[list[tuple[int, int]]]:
    """node_pairs in rounds, no node in two pairs of one round (each pair in the first round where both ends are free),
    so each node's pairs are timed one at a time and pairs of different nodes at once (none on one node)."""
    rounds: list[list[tuple[int, int]]] = []
    busy: list[set[int]] = []
    for a, b in node_pairs(nodes):
        index = next((i for i, taken in enumerate(busy) if a not in taken and b not in taken), len(rounds))
        if index == len(rounds):
            rounds.append([])
            busy.append(set())
        rounds[index].append((a, b))
        busy[index].update((a, b))
    return rounds


def pair_of(round_pairs: list[tuple[int, int]], node: int) -> tuple[int, int] | None:
    """`node`'s pair in a round of pair_rounds, None when it sits the round out."""
    return next((pair for pair in round_pairs if node in pair), None)


def median_pair_figures(pairs: Mapping[tuple[int, int], float], nodes: int) -> dict[int, float]:
    """Each node's figure at the pair level: the upper median of its pairs' figures (see the module's docstring). The
    upper one: a healthy node with as many slow neighbours as fast ones keeps its fast figure, a slow node has no fast
    pair to lift it."""
    by_node: dict[int, list[float]] = {}
    for (a, b), figure in pairs.items():
        for node in (a, b):
            by_node.setdefault(node, []).append(figure)
    return {node: statistics.median_high(by_node[node]) for node in range(nodes) if node in by_node}


def figure_lines(figures: Mapping[str, Mapping[int, float]], names: Mapping[int, str]) -> list[str]:
    """A log line per level: every node's bus bandwidth (GB/s), then the slowest node by its name where the level can
    tell (names_nodes), whether or not it fell below the threshold: the node to suspect when steps run slow."""
    lines = []
    for level, by_node in figures.items():
        shown = ", ".join(f"node {node} {figure:.3g}" for node, figure in sorted(by_node.items()))
        line = f"{level} bus bandwidth GB/s: {shown}"
        if len(by_node) > 1 and names_nodes(level, len(by_node)):
            slowest = min(sorted(by_node), key=lambda node: by_node[node])
            line += f"; slowest node {slowest} ({names.get(slowest, '?')})"
        lines.append(line)
    return lines


def describe(verdict: Verdict, names: Mapping[int, str]) -> list[str]:
    """Log lines for the verdict: each shortfall with the node's name, then the warnings."""
    lines = [
        f"{s.level}: node {s.node} ({names.get(s.node, '?')}) at {s.figure:.3g} GB/s, {s.fraction:.2f} of the "
        f"{s.against} {s.reference:.3g} GB/s"
        for s in verdict.shortfalls
    ]
    return lines + list(verdict.warnings)


def preflight_flag_problems(preflight: PreflightConfig) -> list[str]:
    """What is wrong with the --preflight-* flags (trainer/validate.py reports it before any work)."""
    problems = []
    if not 0 < preflight.min_fraction <= 1:
        problems.append(f"--preflight-min-fraction {preflight.min_fraction:g}: expected a fraction above 0, at most 1")
    if preflight.buffer_bytes < 0:
        problems.append(f"--preflight-bytes {preflight.buffer_bytes}: expected 0 (the device's default) or more")
    if preflight.iterations < 1:
        problems.append(f"--preflight-iterations {preflight.iterations}: expected at least 1")
    expected = {
        "--preflight-expect-intra-gb-per-s": preflight.expect_intra_gb_per_s,
        "--preflight-expect-inter-gb-per-s": preflight.expect_inter_gb_per_s,
    }
    problems += [f"{flag} {value:g}: expected 0 (unknown) or more" for flag, value in expected.items() if value < 0]
    return problems
