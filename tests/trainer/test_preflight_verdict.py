"""The fabric preflight's arithmetic and verdict (trainer/base/hardware/fabric.py), its fault hook, and what the
launcher and the agent make of its exit codes: pure functions, no process group."""

from __future__ import annotations

import pytest
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from trainer.base.faults import FAULT_ENV, preflight_delay_s, slow_preflight_fault
from trainer.base.flags.config import parse_args
from trainer.base.hardware.fabric import (
    INTER_ALL_REDUCE,
    INTER_PAIRS,
    INTRA_ALL_GATHER,
    bus_bandwidth_gb_per_s,
    figure_lines,
    judge,
    median_pair_figures,
    node_pairs,
    pair_rounds,
    preflight_flag_problems,
)
from trainer.base.metrics import figures as metrics
from trainer.base.pod.attempt import ATTEMPT_ENV
from trainer.base.pod.env import DistEnv, read_env
from trainer.base.pod.exits import (
    EXIT_BACKEND_LOST,
    EXIT_BAD_NODE,
    EXIT_PEER_BAD_NODE,
    FINAL_WORKER_EXITS,
    PERMANENT_EXITS,
    describe_exit,
    is_retryable,
)
from trainer.checks.fabric_preflight import Topology, fabric_preflight, topology
from trainer.launch.agent import first_final_failure, only_peer_bad_node
from trainer.launch.launcher import ending


def test_bus_bandwidth_follows_nccl_tests() -> None:
    """PERFORMANCE.md: 8 GB in 1 s over 8 ranks is 7 GB/s for an all-gather or a reduce-scatter, 14 for an
    all-reduce; a send/receive is its algorithm bandwidth."""
    assert bus_bandwidth_gb_per_s("all_gather", 8 * 10**9, 1.0, 8) == pytest.approx(7.0)
    assert bus_bandwidth_gb_per_s("reduce_scatter", 8 * 10**9, 2.0, 8) == pytest.approx(3.5)
    assert bus_bandwidth_gb_per_s("all_reduce", 8 * 10**9, 1.0, 8) == pytest.approx(14.0)
    assert bus_bandwidth_gb_per_s("send_recv", 10**9, 0.5, 2) == pytest.approx(2.0)


def test_a_node_below_the_fraction_of_the_median_is_bad() -> None:
    verdict = judge({INTRA_ALL_GATHER: {0: 100.0, 1: 98.0, 2: 60.0}}, {}, 0.7)
    assert verdict.bad_nodes == (2,)
    assert verdict.slowest_fraction == pytest.approx(60 / 98)


def test_a_minority_below_the_expected_figure_is_bad_a_majority_is_a_warning() -> None:
    expected = {INTRA_ALL_GATHER: 360.0}
    assert judge({INTRA_ALL_GATHER: {0: 350.0, 1: 200.0, 2: 340.0}}, expected, 0.7).bad_nodes == (1,)
    everywhere = judge({INTRA_ALL_GATHER: {0: 200.0, 1: 210.0, 2: 205.0}}, expected, 0.7)
    assert everywhere.bad_nodes == ()
    assert "not a node" in everywhere.warnings[0]
    assert everywhere.slowest_fraction == pytest.approx(200 / 360)


def test_the_log_names_the_slowest_node_even_above_the_threshold() -> None:
    """Issue 27 asks the preflight to name the slowest node: by its name, at the levels that can tell, also when it
    passes (a node at 0.8 of the others is the one to suspect when steps run slow); never on the rails' ring."""
    figures = {INTRA_ALL_GATHER: {0: 300.0, 1: 240.0, 2: 310.0}, INTER_ALL_REDUCE: {0: 40.0, 1: 39.0, 2: 41.0}}
    names = {0: "ip-a", 1: "ip-b", 2: "ip-c"}
    assert judge(figures, {}, 0.7).bad_nodes == ()
    intra, rails = figure_lines(figures, names)
    assert intra == f"{INTRA_ALL_GATHER} bus bandwidth GB/s: node 0 300, node 1 240, node 2 310; slowest node 1 (ip-b)"
    assert rails == f"{INTER_ALL_REDUCE} bus bandwidth GB/s: node 0 40, node 1 39, node 2 41"


def test_the_rails_ring_and_two_nodes_pair_name_no_node() -> None:
    """Every node finishes the rails' all-reduce together, and one pair has two ends: neither says which is slow."""
    verdict = judge({INTER_ALL_REDUCE: {0: 10.0, 1: 10.0}, INTER_PAIRS: {0: 5.0, 1: 5.0}}, {INTER_PAIRS: 40.0}, 0.7)
    assert verdict.bad_nodes == ()
    assert len(verdict.warnings) == 1 and verdict.warnings[0].startswith(INTER_PAIRS)


def test_pairs_are_cyclic_and_no_node_is_in_two_pairs_of_a_round() -> None:
    assert pair_rounds(1) == [] and pair_rounds(2) == [[(0, 1)]]
    assert node_pairs(6) == [
        (0, 1),
        (1, 2),
        (2, 3),
        (3, 4),
        (4, 5),
        (0, 5),
        (0, 2),
        (1, 3),
        (2, 4),
        (3, 5),
        (0, 4),
        (1, 5),
    ]
    for nodes in range(3, 33):
        rounds = pair_rounds(nodes)
        assert sorted(pair for r in rounds for pair in r) == sorted(node_pairs(nodes))
        assert all(len({n for pair in r for n in pair}) == 2 * len(r) for r in rounds)
        assert len(rounds) <= 7  # a node is in at most 4 pairs: rounds stay few whatever the number of nodes


def pair_figures_with(slow: set[int], nodes: int) -> dict[int, float]:
    """Synthetic timings: a pair with a slow end runs at 5 GB/s, others at 40."""
    return median_pair_figures({p: 5.0 if slow & set(p) else 40.0 for r in pair_rounds(nodes) for p in r}, nodes)


@pytest.mark.parametrize(
    ("slow", "nodes"),
    [({0}, 4), ({1}, 4), ({3}, 4), ({0}, 6), ({1}, 6), ({4}, 6), ({0, 1}, 6), ({0, 3}, 6), ({2, 4}, 6), ({1}, 3)],
)
def test_slow_nodes_are_named_by_the_median_of_their_pairs_whichever_they_are(slow: set[int], nodes: int) -> None:
    figures = pair_figures_with(slow, nodes)
    assert {node for node, figure in figures.items() if figure == 5.0} == slow
    assert judge({INTER_PAIRS: figures}, {}, 0.7).bad_nodes == tuple(sorted(slow))
    assert judge({INTER_PAIRS: figures}, {INTER_PAIRS: 40.0}, 0.7).bad_nodes == tuple(sorted(slow))


def test_the_slow_preflight_fault_delays_only_its_rank_and_the_first_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, slow_preflight_fault(250, rank=1))
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "0")
    assert preflight_delay_s() == 0.25
    monkeypatch.setenv("RANK", "0")
    assert preflight_delay_s() == 0.0
    monkeypatch.setenv(FAULT_ENV, slow_preflight_fault(250))
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    assert preflight_delay_s() == 0.0


def test_bad_node_is_retryable_and_apart_from_signals_and_the_lost_backend() -> None:
    assert is_retryable(EXIT_BAD_NODE) and EXIT_BAD_NODE != EXIT_BACKEND_LOST
    assert EXIT_BAD_NODE - 128 > 64  # above SIGRTMAX: never read as a signal's code
    assert EXIT_BAD_NODE not in PERMANENT_EXITS and EXIT_PEER_BAD_NODE not in (*PERMANENT_EXITS, *FINAL_WORKER_EXITS)
    assert describe_exit(EXIT_BAD_NODE) == "201 (bad node: fabric preflight)"


def failed(*codes: int) -> dict[int, ProcessFailure]:
    return {rank: ProcessFailure(local_rank=rank, pid=100 + rank, exitcode=code, error_file="") for rank, code in
            enumerate(codes)}  # fmt: skip


def test_the_bad_nodes_launcher_ends_201_and_leaves_the_rendezvous_open() -> None:
    failures = failed(EXIT_BAD_NODE, EXIT_BAD_NODE)
    assert first_final_failure(failures) == (0, EXIT_BAD_NODE)  # the agent spends no restart on it
    end = ending(ChildFailedError("trainer", failures))
    assert (end.code, end.closes_rendezvous) == (EXIT_BAD_NODE, False)


def test_only_a_peers_bad_node_restarts_without_counting() -> None:
    assert only_peer_bad_node(failed(EXIT_PEER_BAD_NODE, EXIT_PEER_BAD_NODE))
    assert only_peer_bad_node(failed(EXIT_PEER_BAD_NODE, -15))  # a sibling the agent stopped a moment before it exited
    assert not only_peer_bad_node(failed(EXIT_PEER_BAD_NODE, 1))
    assert not only_peer_bad_node(failed(-15, -15))
    assert not only_peer_bad_node({})


def test_every_record_of_a_start_carries_its_preflight_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "_start_figures", {})
    metrics.set_start_figures({"preflight_intra_all_gather_gb_per_s": 310.5, "preflight_slowest_fraction": 0.9})
    record = metrics.StepMetrics(1, 2.0, 3.0, 3.0, None, 0.1, 1, 1e-4, 1.0, 2, 0, 64, 0.01)
    assert record.preflight_intra_all_gather_gb_per_s == 310.5 and record.preflight_slowest_fraction == 0.9
    assert record.preflight_inter_all_reduce_gb_per_s is None
    with pytest.raises(ValueError, match="not preflight figures"):
        metrics.set_start_figures({"loss": 1.0})


def test_preflight_flags_out_of_range_are_refused_naming_the_flag() -> None:
    config = parse_args(["--preflight-min-fraction", "1.5", "--preflight-iterations", "0"])
    problems = preflight_flag_problems(config.preflight)
    assert [problem.split()[0] for problem in problems] == ["--preflight-min-fraction", "--preflight-iterations"]
    assert preflight_flag_problems(parse_args([]).preflight) == []


def ranks_of_uneven_nodes(group_world: str | None) -> list[DistEnv]:
    """A rank of each node of a start with 4 workers on one node and 2 on the other, as torchrun sets them."""
    extra = {} if group_world is None else {"GROUP_WORLD_SIZE": group_world, ATTEMPT_ENV: "1-5e1f09"}
    return [
        read_env({"RANK": rank, "WORLD_SIZE": "6", "LOCAL_WORLD_SIZE": local, "LOCAL_RANK": "0", **extra})
        for rank, local in (("0", "4"), ("4", "2"))
    ]


def test_every_rank_of_uneven_nodes_skips_the_preflight_alike_before_any_collective() -> None:
    """Node 0's ranks found 6 % 4 != 0 and skipped, node 1's 6 % 2 == 0 and waited in the preflight's rendezvous."""
    config = parse_args(["--device", "cpu"])
    for env in ranks_of_uneven_nodes("2") + ranks_of_uneven_nodes(None):
        assert env.launched and topology(env) is None
        assert fabric_preflight(config, env, "cpu") == 0  # no MASTER_ADDR here: a rendezvous would raise
    even = read_env(
        {"RANK": "3", "WORLD_SIZE": "6", "LOCAL_WORLD_SIZE": "2", "GROUP_WORLD_SIZE": "3", ATTEMPT_ENV: "1-5e1f09"}
    )
    assert topology(even) == Topology(3, 2)


def test_a_world_of_one_rank_forms_no_preflight_group() -> None:
    """torchrun with one worker on one node: nothing to compare, and no group is formed (no MASTER_ADDR here: a
    rendezvous would raise)."""
    one = read_env({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1", "GROUP_WORLD_SIZE": "1"})
    assert fabric_preflight(parse_args(["--device", "cpu"]), one, "cpu") == 0
