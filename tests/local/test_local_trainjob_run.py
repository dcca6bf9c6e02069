"""The stack's job as a Trainer v2 TrainJob on this machine: two real torchrun agents meeting in torchrun's static
rendezvous on node 0, as Trainer v2 sets it up, and a node lost after a checkpoint, after which the whole gang is
started again as the runtime's JobSet failure policy says and the trainer resumes on the same loss curve."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from local.drills.evict_pod import EVICTIONS
from local.options import LocalJobOptions, LocalOptions, LocalRunError
from local.procs import alive
from local.run import run_local
from local.supervise import LocalResult
from tests.local.runs import CHECKPOINT_EVERY, RUN_TIMEOUT_S, STEPS, TEST_TIMEOUT_S, processes_mentioning
from trainer.base.pod.exits import REASON_PREFIX
from trainer.checkpoint.layout import checkpoint_name
from trainer.record.summary import latest_per_step

pytestmark = [pytest.mark.slow, pytest.mark.timeout(TEST_TIMEOUT_S)]

TRAINJOB = LocalJobOptions(nodes=2, steps=STEPS, checkpoint_every=CHECKPOINT_EVERY, api="trainjob")
# Both runs train at world size 2 from the same seed and data order; restored weights, optimizer state and data
# position give the resumed run the uninterrupted run's losses (to float32 rounding at most).
LOSS_TOLERANCE = 1e-6


def run_trainjob(work_dir: Path, job: LocalJobOptions = TRAINJOB, **changes: Any) -> LocalResult:
    options = LocalOptions(stack="dev", job=job, work_dir=work_dir, timeout_s=RUN_TIMEOUT_S, **changes)
    return run_local(options)


def node_log(result: LocalResult, node: int) -> str:
    return (result.work_dir / "logs" / f"{result.plan.job}-node-0-{node}.log").read_text(errors="replace")


def losses(result: LocalResult) -> dict[int, float]:
    return {record["step"]: record["loss"] for record in latest_per_step(result.records)}


@pytest.fixture(scope="module")
def clean_trainjob(tmp_path_factory: pytest.TempPathFactory) -> LocalResult:
    return run_trainjob(tmp_path_factory.mktemp("trainjob-clean"))


@pytest.fixture(scope="module")
def lost_node_trainjob(tmp_path_factory: pytest.TempPathFactory) -> LocalResult:
    """Node 1 (its agent and its worker) killed after the first checkpoint."""
    return run_trainjob(tmp_path_factory.mktemp("trainjob-kill-agent"), drill="kill-agent")


@pytest.fixture(scope="module")
def evicted_trainjob(tmp_path_factory: pytest.TempPathFactory) -> LocalResult:
    """Node 1 evicted (SIGTERM, as a drain; the pod marked DisruptionTarget) twice, with maxRestarts 1."""
    options = LocalOptions(
        stack="dev",
        job=dataclasses.replace(TRAINJOB, max_restarts=1),
        work_dir=tmp_path_factory.mktemp("trainjob-evict-pod"),
        timeout_s=RUN_TIMEOUT_S,
        drill="evict-pod",
    )
    return run_local(options)


@pytest.fixture(scope="module")
def endlessly_disrupted_trainjob(tmp_path_factory: pytest.TempPathFactory) -> LocalResult:
    """Node 1 evicted twice in a job that survives one uncounted gang restart and no counted one: the backstop."""
    job = dataclasses.replace(TRAINJOB, max_restarts=0, max_disruption_restarts=1)
    return run_trainjob(tmp_path_factory.mktemp("trainjob-disrupted"), drill="evict-pod", job=job)


def test_the_trainjobs_command_trains_every_step_on_two_nodes(clean_trainjob: LocalResult) -> None:
    assert clean_trainjob.succeeded, clean_trainjob.reason
    summary = clean_trainjob.summary
    assert summary is not None and summary.steps == STEPS and summary.world_sizes == [2]
    assert clean_trainjob.pod_restarts == 0
    assert clean_trainjob.plan.rendezvous_id.startswith("static on 127.0.0.1:")


def test_the_clean_trainjob_stops_every_process_it_started(clean_trainjob: LocalResult) -> None:
    assert processes_mentioning(str(clean_trainjob.work_dir)) == []


def test_the_lost_node_drill_kills_its_agent_and_its_workers(lost_node_trainjob: LocalResult) -> None:
    drill = lost_node_trainjob.drill
    assert drill is not None and len(drill.killed) >= 2
    assert not any(alive(proc) for proc in drill.killed)
    assert drill.at_step < STEPS


def test_the_survivor_ends_with_exit_1_and_the_jobset_still_restarts_the_gang(lost_node_trainjob: LocalResult) -> None:
    """Under a static rendezvous the survivor's workers fail with their peer, and its launcher exits 1, torchrun's
    restarts spent: the code the PyTorchJob treats as final. The runtime must not, or a lost node would end the run."""
    assert f"{REASON_PREFIX}exit 1, permanent" in node_log(lost_node_trainjob, 0)
    assert lost_node_trainjob.succeeded, lost_node_trainjob.reason
    assert lost_node_trainjob.pod_restarts == 2  # one JobSet restart: both pods created again


def test_the_restarted_gang_resumes_from_the_checkpoint_before_the_kill(lost_node_trainjob: LocalResult) -> None:
    drill = lost_node_trainjob.drill
    assert drill is not None and drill.checkpoint_step is not None
    expected = f"resumed from {lost_node_trainjob.checkpoint_dir}/{checkpoint_name(drill.checkpoint_step)}"
    assert expected in node_log(lost_node_trainjob, 0)


def test_the_resumed_trainjob_is_on_the_uninterrupted_loss_curve(
    lost_node_trainjob: LocalResult, clean_trainjob: LocalResult
) -> None:
    resumed, clean = losses(lost_node_trainjob), losses(clean_trainjob)
    assert set(clean) <= set(resumed) and len(clean) >= 2  # a drill's run logs every step, the clean one every tenth
    assert {step: resumed[step] for step in clean} == pytest.approx(clean, rel=LOSS_TOLERANCE)


def test_the_lost_node_trainjob_stops_every_process_it_started(lost_node_trainjob: LocalResult) -> None:
    assert processes_mentioning(str(lost_node_trainjob.work_dir)) == []


def test_an_etcd_drill_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(LocalRunError, match="a TrainJob has no etcd"):
        run_trainjob(tmp_path, drill="restart-etcd")
    assert not (tmp_path / "logs").exists()


def test_evictions_restart_the_gang_without_using_up_max_restarts(evicted_trainjob: LocalResult) -> None:
    """Each eviction fails its Job by the DisruptionTarget rule, which JobSet restarts uncounted: two of them in a
    job with maxRestarts 1 still end in success."""
    assert evicted_trainjob.succeeded, evicted_trainjob.reason
    drill = evicted_trainjob.drill
    assert drill is not None and drill.repeats == EVICTIONS
    assert evicted_trainjob.pod_restarts == EVICTIONS * evicted_trainjob.plan.replicas


def test_the_trainjobs_restart_count_is_the_jobsets_restart_attempt(evicted_trainjob: LocalResult) -> None:
    """Each restarted gang meets in a fresh static rendezvous, whose own count starts at 1 again: the trainer's
    `restarts` is the JobSet's restart attempt (its pods' label), not 0."""
    assert latest_per_step(evicted_trainjob.records)[-1]["restarts"] == EVICTIONS


def test_a_gang_restarted_past_its_bound_ends_the_trainjob(endlessly_disrupted_trainjob: LocalResult) -> None:
    """Uncounted restarts have a bound too (job.maxRestarts + job.maxDisruptionRestarts, here 1): the second eviction's
    gang starts nothing, every launcher exits 6, and the runtime's finalExit rule fails the JobSet."""
    result = endlessly_disrupted_trainjob
    drill = result.drill
    assert drill is not None and drill.repeats == EVICTIONS
    assert not result.succeeded
    assert "failed with exit code 6" in result.reason and "rule finalExit: FailJobSet" in result.reason
    assert f"{REASON_PREFIX}exit 6 (gang restarts spent), permanent" in node_log(result, 0)
    assert processes_mentioning(str(result.work_dir)) == []


def test_the_evicted_trainjob_ends_on_the_uninterrupted_losses(
    evicted_trainjob: LocalResult, clean_trainjob: LocalResult
) -> None:
    resumed, clean = losses(evicted_trainjob), losses(clean_trainjob)
    assert set(clean) <= set(resumed)
    for step, loss in clean.items():
        assert resumed[step] == pytest.approx(loss, rel=LOSS_TOLERANCE), f"step {step}"
