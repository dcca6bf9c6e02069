"""The stack's job on this machine: real etcd, two real torchrun agents, real faults.

Each test is one behaviour of the local run (local/run.py), on the dev stack's job with two agents
elastic 1:2 and the tiny model for 40 steps, checkpointing every 10. The runs themselves are fixtures
(conftest.py), made once per module.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from local.drills.evict_pod import EVICTIONS
from local.etcd import LocalEtcd
from local.procs import alive
from local.supervise import LocalResult
from tests.local.runs import NPROC_PER_NODE, STEPS, TEST_TIMEOUT_S, final_loss, log_of, processes_mentioning, run_dev
from trainer.base.pod.exits import REASON_PREFIX
from trainer.checkpoint.layout import checkpoint_name, complete_checkpoints

pytestmark = [pytest.mark.slow, pytest.mark.timeout(TEST_TIMEOUT_S)]

# The same global batch at world size 2 and 1 gives the same samples and the same mean loss; only the order of the
# fp32 gradient sums differs (across ranks vs across micro steps), which moves the loss by float32 rounding, far
# inside this tolerance. A lost or repeated step, another batch, or weights not restored move it much more.
LOSS_TOLERANCE = 1e-4
# Where a blocked worker's main thread waits: FSDP2's collectives, the trainer's gloo reduce-scatter, torch's c10d and
# functional collectives (the innermost frames the watcher logs).
COLLECTIVE_CODE = ("_fsdp_collectives.py", "reduce_scatter.py", "distributed_c10d.py", "_functional_collectives.py")


def max_restarts(result: LocalResult) -> int:
    return int(result.plan.agents[0].env["PET_MAX_RESTARTS"])


# (a) a clean run


def test_clean_run_trains_every_step_on_both_agents(clean_run: LocalResult) -> None:
    assert clean_run.succeeded, clean_run.reason
    assert clean_run.summary is not None and clean_run.summary.steps == STEPS
    assert clean_run.summary.world_sizes == [2]
    assert clean_run.pod_restarts == 0


def test_clean_run_leaves_checkpoints_metrics_chart_and_export(clean_run: LocalResult) -> None:
    assert clean_run.checkpoint_dir is not None and clean_run.metrics_file is not None
    assert complete_checkpoints(clean_run.checkpoint_dir)[-1][0] == STEPS
    records = [json.loads(line) for line in clean_run.metrics_file.read_text().splitlines()]
    assert records[-1]["step"] == STEPS
    assert clean_run.chart is not None and clean_run.chart.read_text().startswith("<svg ")
    assert (Path(str(clean_run.plan.trainer.checkpoint.export_hf)) / "config.json").is_file()


def test_clean_run_stops_every_process_it_started(clean_run: LocalResult) -> None:
    assert processes_mentioning(str(clean_run.work_dir)) == []


# (b) one agent killed, with its workers, after the first checkpoint


def test_killed_agent_drill_kills_the_agent_and_all_its_workers(killed_agent_run: LocalResult) -> None:
    drill = killed_agent_run.drill
    assert drill is not None and len(drill.killed) >= 2, "expected the agent and at least one worker"
    assert not any(alive(proc) for proc in drill.killed)
    assert drill.at_step < STEPS, "the drill fired only after the job had finished"


def test_killed_agent_job_finishes_on_the_survivor_within_max_restarts(killed_agent_run: LocalResult) -> None:
    assert killed_agent_run.succeeded, killed_agent_run.reason
    summary = killed_agent_run.summary
    assert summary is not None and summary.steps == STEPS
    assert summary.world_sizes == [2, 1]
    assert 1 <= summary.worker_restarts <= max_restarts(killed_agent_run)


def test_killed_agent_job_resumes_from_the_checkpoint_before_the_kill(killed_agent_run: LocalResult) -> None:
    drill = killed_agent_run.drill
    assert drill is not None and drill.checkpoint_step is not None
    expected = f"resumed from {killed_agent_run.checkpoint_dir}/{checkpoint_name(drill.checkpoint_step)}"
    assert expected in log_of(killed_agent_run, 0)


def test_killed_agent_job_ends_at_the_uninterrupted_loss(killed_agent_run: LocalResult, clean_run: LocalResult) -> None:
    assert final_loss(killed_agent_run) == pytest.approx(final_loss(clean_run), rel=LOSS_TOLERANCE)


def test_killed_agent_job_stops_every_process_it_started(killed_agent_run: LocalResult) -> None:
    assert processes_mentioning(str(killed_agent_run.work_dir)) == []


# (c) a rank crashes on a node of two workers, and its peers block as NCCL's do (its sibling and the other node's two):
# their main threads stay inside a collective that never completes, their other threads run. Pod 1's agent counts a
# restart, pod 0's restarts its workers for the membership change without counting one; every blocked worker leaves
# on its agent's SIGTERM through the trainer's watcher thread, and the job re-forms all the same because the workers'
# attempt is agreed through the rendezvous round, not taken from each node's count


def test_hung_peer_drill_kills_one_worker_and_leaves_its_peers_blocked_not_stopped(hung_peer_run: LocalResult) -> None:
    drill = hung_peer_run.drill
    assert drill is not None and len(drill.killed) == 1 and len(drill.blocked) == 2 * NPROC_PER_NODE - 1
    assert drill.held_connections > 0 and "SIGSTOP" not in drill.detail
    assert drill.at_step < STEPS, "the drill fired only after the job had finished"
    assert not any(alive(proc) for proc in drill.blocked + drill.killed)


def test_every_blocked_worker_leaves_through_its_watcher_with_its_main_thread_in_a_collective(
    hung_peer_run: LocalResult,
) -> None:
    """The watcher (another thread of the worker) ran while the main thread stayed in FSDP's collective: the shape of a
    GPU node's blocked ranks, which a stopped process (SIGSTOP) cannot show. The other pod's workers are stopped only
    once the job re-forms, long after they blocked: each leaves through its watcher. The crashed worker's sibling is
    stopped as soon as its agent sees the crash, which may come before the sibling reached the collective (as on a
    real node): it leaves through the watcher or, still running Python, through the handler itself."""
    drill = hung_peer_run.drill
    assert drill is not None
    crashed = re.search(r"of \S+-worker-(\d+)", drill.detail)
    assert crashed is not None, drill.detail
    crashed_pod = int(crashed.group(1))
    blocked_chain = r"the main thread has not run its handler in \d s, blocked in ([^;]+);"
    other_chains = re.findall(blocked_chain, log_of(hung_peer_run, 1 - crashed_pod))
    sibling_log = log_of(hung_peer_run, crashed_pod)
    sibling_chains = re.findall(blocked_chain, sibling_log)
    assert len(other_chains) == NPROC_PER_NODE, other_chains
    assert len(sibling_chains) <= NPROC_PER_NODE - 1
    assert sibling_log.count("SIGTERM: exiting") == NPROC_PER_NODE - 1
    chains = other_chains + sibling_chains
    assert all(any(name in chain for name in COLLECTIVE_CODE) for chain in chains), chains


def test_hung_peer_recovery_is_reported_to_the_step(hung_peer_run: LocalResult) -> None:
    """The time from the last step before the fault to the first after it is reported (no bound asserted: the machine
    is shared); with every step logged under a drill, the first after it is the one after the checkpoint."""
    recovery, drill = hung_peer_run.recovery, hung_peer_run.drill
    assert recovery is not None and drill is not None and drill.checkpoint_step is not None
    assert recovery.first_step == drill.checkpoint_step + 1 and recovery.seconds > 0
    print(f"hung-peer, {NPROC_PER_NODE} workers per pod: {recovery.line()}")


def test_hung_peer_job_reforms_and_finishes_every_step_on_both_nodes(hung_peer_run: LocalResult) -> None:
    assert hung_peer_run.succeeded, hung_peer_run.reason
    summary = hung_peer_run.summary
    assert summary is not None and summary.steps == STEPS
    assert summary.world_sizes == [2 * NPROC_PER_NODE]


def test_hung_peer_restart_counts_apart_yet_one_attempt(hung_peer_run: LocalResult) -> None:
    """The blocked pod's torchrun counted no restart, the crashed pod's one; both pods' second start is one attempt."""
    assert "failed (exitcode: -9)" in log_of(hung_peer_run, 1) and "failed (exitcode" not in log_of(hung_peer_run, 0)
    attempts = [re.findall(r"workers' attempt (\w+)", log_of(hung_peer_run, pod)) for pod in (0, 1)]
    assert len(attempts[0]) == len(attempts[1]) == 2
    assert attempts[0] == attempts[1] and attempts[0][0] != attempts[0][1]


def test_hung_peer_job_resumes_from_the_checkpoint_before_the_fault(hung_peer_run: LocalResult) -> None:
    drill = hung_peer_run.drill
    assert drill is not None and drill.checkpoint_step is not None
    expected = f"resumed from {hung_peer_run.checkpoint_dir}/{checkpoint_name(drill.checkpoint_step)}"
    assert expected in log_of(hung_peer_run, 0)


def assert_on_the_loss_curve(result: LocalResult, clean: LocalResult) -> None:
    """Every step the uninterrupted run logged has the same loss in `result` (a step logged again: the later; a drill's
    run logs every step, the clean run every tenth)."""
    resumed = {record["step"]: record["loss"] for record in result.records}
    expected = {record["step"]: record["loss"] for record in clean.records}
    assert set(expected) <= set(resumed)
    for step, loss in expected.items():
        assert resumed[step] == pytest.approx(loss, rel=LOSS_TOLERANCE), f"step {step}"


def test_hung_peer_job_follows_the_uninterrupted_loss_curve(hung_peer_run: LocalResult, clean_run: LocalResult) -> None:
    assert_on_the_loss_curve(hung_peer_run, clean_run)


def test_hung_peer_job_stops_every_process_it_started(hung_peer_run: LocalResult) -> None:
    assert processes_mentioning(str(hung_peer_run.work_dir)) == []


# (d) a pod evicted twice, as drains for a node-group update or the end of a capacity block evict it, in a job whose
# maxRestarts is 1: the evicted pod is created again (exit 143), the other pod's workers fail with it (gloo) and its
# agent restarts them without counting it, and the job re-forms with the pod created again (a node that joins a later
# round finds the store address in that round)


def test_evicted_pod_is_created_again_and_the_job_finishes_every_step(evicted_run: LocalResult) -> None:
    assert evicted_run.succeeded, evicted_run.reason
    drill = evicted_run.drill
    assert drill is not None and drill.repeats == EVICTIONS
    assert evicted_run.pod_restarts == EVICTIONS
    summary = evicted_run.summary
    assert summary is not None and summary.steps == STEPS


def test_evictions_use_up_none_of_the_other_pods_restarts(evicted_run: LocalResult) -> None:
    assert max_restarts(evicted_run) < EVICTIONS
    uncounted = "a node of this round left on request (SIGTERM): the workers are restarted without counting it"
    assert log_of(evicted_run, 0).count(uncounted) == EVICTIONS


def test_evicted_job_follows_the_uninterrupted_loss_curve(evicted_run: LocalResult, clean_run: LocalResult) -> None:
    assert_on_the_loss_curve(evicted_run, clean_run)


def test_evicted_job_stops_every_process_it_started(evicted_run: LocalResult) -> None:
    assert processes_mentioning(str(evicted_run.work_dir)) == []


# (e) etcd restarted mid-run, empty: every agent's launcher exits 200 (retryable) and leaves the rendezvous open; the
# pods are created again, rejoin in the new etcd and resume from the last checkpoint


def test_restarted_etcd_job_finishes_every_step(restarted_etcd_run: LocalResult) -> None:
    assert restarted_etcd_run.succeeded, restarted_etcd_run.reason
    summary = restarted_etcd_run.summary
    assert summary is not None and summary.steps == STEPS
    drill = restarted_etcd_run.drill
    assert drill is not None and drill.at_step < STEPS, "the drill fired only after the job had finished"


def test_restarted_etcd_recreates_each_pod_whose_launcher_lost_the_backend(restarted_etcd_run: LocalResult) -> None:
    # Both pods at least once; again if a pod created again came up while etcd was still down.
    assert restarted_etcd_run.pod_restarts >= 2
    for pod in (0, 1):
        log = log_of(restarted_etcd_run, pod)
        assert f"{REASON_PREFIX}exit 200 (rendezvous backend lost), retryable" in log
        assert "RendezvousClosedError" not in log


def test_restarted_etcd_job_resumes_from_the_checkpoint_before_the_restart(restarted_etcd_run: LocalResult) -> None:
    drill = restarted_etcd_run.drill
    assert drill is not None and drill.checkpoint_step is not None
    # Rank 0 logs it, in whichever pod the re-formed group gave rank 0.
    logs = log_of(restarted_etcd_run, 0) + log_of(restarted_etcd_run, 1)
    resumed = re.findall(rf"resumed from {restarted_etcd_run.checkpoint_dir}/step_(\d+)", logs)
    assert resumed and int(resumed[-1]) >= drill.checkpoint_step


def test_restarted_etcd_job_ends_at_the_uninterrupted_loss(
    restarted_etcd_run: LocalResult, clean_run: LocalResult
) -> None:
    assert final_loss(restarted_etcd_run) == pytest.approx(final_loss(clean_run), rel=LOSS_TOLERANCE)


def test_restarted_etcd_job_stops_every_process_it_started(restarted_etcd_run: LocalResult) -> None:
    assert processes_mentioning(str(restarted_etcd_run.work_dir)) == []


# (f) two runs in a row against one etcd, nothing cleaned up in between


def test_second_run_against_the_same_etcd_starts_normally(tmp_path: Path, shared_etcd: LocalEtcd) -> None:
    first = run_dev(tmp_path / "first", etcd_endpoint=shared_etcd.endpoint)
    second = run_dev(tmp_path / "second", etcd_endpoint=shared_etcd.endpoint)
    assert first.succeeded and second.succeeded, (first.reason, second.reason)
    assert second.summary is not None and second.summary.steps == STEPS
    assert second.pod_restarts == 0
    assert first.plan.rendezvous_id != second.plan.rendezvous_id


# (g) an agent whose workers keep dying exhausts its restarts: the job fails at once, and no pod restarts


def test_exhausted_agent_restarted_its_workers_max_restarts_times(exhausted_agent_run: LocalResult) -> None:
    drill = exhausted_agent_run.drill
    assert drill is not None and drill.at_step < STEPS, "the drill fired only after the job had finished"
    # Killed once at the trigger and once after each of torchrun's restarts of the worker group.
    assert drill.repeats == max_restarts(exhausted_agent_run) + 1
    assert not any(alive(proc) for proc in drill.killed)


def test_exhausted_agent_fails_the_job_naming_the_pod_and_the_rule(exhausted_agent_run: LocalResult) -> None:
    assert not exhausted_agent_run.succeeded
    pod = f"{exhausted_agent_run.plan.job}-worker-1"
    assert exhausted_agent_run.reason.startswith(
        f"{pod}'s agent exited 1; restartPolicy ExitCode fails the job on codes 1 to 127 and restarts nothing "
        f"[{REASON_PREFIX}exit 1, permanent: the workers failed and --max-restarts is spent (ChildFailedError"
    )
    assert "ChildFailedError" in log_of(exhausted_agent_run, 1)  # torchrun's own account of why it gave up


def test_exhausted_agent_is_not_restarted_into_the_closed_rendezvous(exhausted_agent_run: LocalResult) -> None:
    assert exhausted_agent_run.pod_restarts == 0
    for pod in (0, 1):
        log = log_of(exhausted_agent_run, pod)
        starts = re.findall(rf"^--- \S+ start {exhausted_agent_run.plan.job}-worker-{pod} ", log, re.MULTILINE)
        assert len(starts) == 1, f"worker pod {pod} was started {len(starts)} times"
        assert "RendezvousClosedError" not in log


def test_exhausted_agent_job_stops_every_process_it_started(exhausted_agent_run: LocalResult) -> None:
    assert processes_mentioning(str(exhausted_agent_run.work_dir)) == []
