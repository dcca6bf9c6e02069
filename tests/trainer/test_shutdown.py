"""SIGTERM (a pod being stopped) during a save: the save is finished and committed when its shards are written (or
are within --checkpoint-stop-wait-seconds), otherwise abandoned as a .tmp directory; the process then ends as SIGTERM
ends it, the pod's launcher exits 143, and the run resumes from the committed checkpoint exactly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import Future
from pathlib import Path

import pytest

from local.procs import kill_tree, process_tree
from tests.harness.trainer_runs import ROOT, TINY, TrainerRun, assert_same_losses, run_trainer, trainer_env, with_flags
from tests.trainer.process_groups import DEFAULT_GROUP
from trainer.base.flags.config import CheckpointConfig
from trainer.base.pod.env import DistEnv
from trainer.base.pod.exits import LAUNCH_MODULE, REASON_PREFIX, exit_for_signal
from trainer.checkpoint.checkpointer import Checkpointer
from trainer.checkpoint.commit import PendingSave
from trainer.checkpoint.layout import complete_checkpoints


def saving(tmp_path: Path, *extra: str) -> list[str]:
    return [*with_flags(TINY, checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every="2"), *extra]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigterm_to_the_pod_during_a_background_save_commits_it_and_the_launcher_exits_143(
    reference_run: TrainerRun, tmp_path: Path
) -> None:
    """The pod's main process, the launcher (as the PyTorchJob runs it), gets SIGTERM while step 4's save is being
    written in the background (rank 0 sends it there at that point, as the kubelet would): torchrun passes it to
    both workers, which wait for the write and commit it; the launcher exits 143, a code the operator retries, and
    the run resumes from that checkpoint on the uninterrupted run's loss curve."""
    args = saving(tmp_path, "--async-checkpoint")
    stopped = run_trainer(args, tmp_path, nproc=2, launcher=LAUNCH_MODULE, fault="sigterm_agent_during_save:4@0")
    assert stopped.returncode == 143, stopped.output  # torchrun on its own: 1, which fails the whole job
    assert stopped.output.rstrip().endswith(
        f"{REASON_PREFIX}exit 143 (SIGTERM), retryable: stopped by SIGTERM; the workers got it first, "
        "with --shutdown-timeout to finish"
    )
    assert "SIGTERM: exiting" in stopped.output  # trainer/base/pod/shutdown.py's handler, after settling the save
    assert 4 in [record["step"] for record in stopped.metrics]
    assert [step for step, _ in complete_checkpoints(tmp_path / "ckpt")] == [2, 4]
    assert not list((tmp_path / "ckpt").glob("*.tmp"))

    resumed = run_trainer(args, tmp_path, nproc=2, launcher=LAUNCH_MODULE)
    assert resumed.returncode == 0, resumed.output
    assert [record["step"] for record in resumed.metrics] == [5, 6]
    assert_same_losses({**stopped.losses(), **resumed.losses()}, reference_run.losses())


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigterm_as_a_background_save_starts_waits_for_the_save_and_commits_it(tmp_path: Path) -> None:
    """A signal passed on by the agent reaches each rank wherever it is, also inside the save call before its write
    is registered as the save in progress: the handler then lets the call finish and settles that save, rather than
    ending the rank with its shards unwritten (which would fail its peers' write too)."""
    run = run_trainer(saving(tmp_path, "--async-checkpoint"), tmp_path, nproc=2, fault="sigterm_starting_save:4")
    assert run.returncode != 0, run.output
    assert "abandoned" not in run.output, run.output
    assert [step for step, _ in complete_checkpoints(tmp_path / "ckpt")] == [2, 4]
    assert not list((tmp_path / "ckpt").glob("*.tmp"))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigterm_after_a_synchronous_write_commits_it_and_ends_as_sigterm_does(tmp_path: Path) -> None:
    run = run_trainer(saving(tmp_path), tmp_path, fault="sigterm_during_save:2")
    assert run.returncode == -signal.SIGTERM, run.output
    assert "SIGTERM: exiting" in run.output
    assert [step for step, _ in complete_checkpoints(tmp_path / "ckpt")] == [2]


def pending_save(tmp_path: Path, future: Future) -> Checkpointer:
    checkpointer = Checkpointer(CheckpointConfig(directory=str(tmp_path)), DistEnv(), "cpu", {}, io=DEFAULT_GROUP)
    tmp = tmp_path / "step_00000007.tmp"
    tmp.mkdir()
    checkpointer._track(PendingSave(7, 56, tmp, tmp_path / "step_00000007", 0.0, 0, future))
    return checkpointer


def test_a_save_still_writing_after_the_wait_is_abandoned(tmp_path: Path) -> None:
    assert pending_save(tmp_path, Future()).settle(wait_s=0.05) is False
    assert complete_checkpoints(tmp_path) == [] and (tmp_path / "step_00000007.tmp").is_dir()


def test_a_save_that_finishes_within_the_wait_is_committed(tmp_path: Path) -> None:
    done: Future = Future()
    done.set_result(None)
    assert pending_save(tmp_path, done).settle(wait_s=0.05) is True
    assert [step for step, _ in complete_checkpoints(tmp_path)] == [7]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_rank_blocked_in_a_collective_leaves_promptly_on_sigterm(tmp_path: Path) -> None:
    """Its main thread is inside a gloo recv that never completes (the connection stays open, as NCCL's peers of a
    crashed rank see it), so its Python handler never runs; the handler's watcher ends it within the grace period
    with SIGTERM's exit code, naming where the main thread was, instead of torchrun's SIGKILL 30 s later."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    command += ["-m", "tests.trainer.blocked_probe", "--marks", str(tmp_path)]
    env = {**trainer_env(), "LOGLEVEL": "WARNING"}
    agent = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (marks := list(tmp_path.glob("blocked.*"))) and time.monotonic() < deadline:
            assert agent.poll() is None, agent.communicate()[0]
            time.sleep(0.2)
        time.sleep(1.0)  # into the recv
        os.kill(int(marks[0].suffix[1:]), signal.SIGTERM)
        sent = time.monotonic()
        output, _ = agent.communicate(timeout=60)  # rank 1 ends; torchrun then stops rank 0 and fails
        left_after_s = time.monotonic() - sent
    finally:
        kill_tree(agent.pid, process_tree(agent.pid))
    assert "the main thread has not run its handler in 1 s, blocked in" in output
    assert "distributed_c10d.py" in output  # the recv, innermost
    assert f"exitcode  : {exit_for_signal(signal.SIGTERM)}" in output  # the watcher's exit, not a SIGKILL
    assert left_after_s < 30  # reported, not a timing claim: torchrun's SIGKILL would come 30 s later at the least
