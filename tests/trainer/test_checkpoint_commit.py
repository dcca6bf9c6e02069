"""The commit of a background save: rank 0 commits it in the thread that completes the save, whatever its main thread
is doing (blocked in a collective on a lost peer, under NCCL), exactly once whichever of that thread, the poll
between steps, finish() and the SIGTERM handler's settle() gets there first; a save abandoned on SIGTERM stays
uncommitted, and failures are raised on the main thread."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

import pytest

from tests.harness.trainer_runs import TINY, run_trainer, with_flags
from tests.trainer.process_groups import DEFAULT_GROUP
from trainer.base.flags.config import CheckpointConfig
from trainer.base.pod.env import DistEnv
from trainer.checkpoint.checkpointer import Checkpointer
from trainer.checkpoint.commit import PendingSave
from trainer.checkpoint.layout import (
    DCP_METADATA_FILE,
    META_FILE,
    commit_directory,
    complete_checkpoints,
    leftover_directories,
)

STEP = 7


def save_in_flight(directory: Path, future: Future) -> tuple[Checkpointer, PendingSave]:
    """Rank 0 of a world of one with step 7's background save under way (its shards being written into the .tmp)."""
    checkpointer = Checkpointer(CheckpointConfig(directory=str(directory)), DistEnv(), "cpu", {}, io=DEFAULT_GROUP)
    tmp = directory / "step_00000007.tmp"
    tmp.mkdir(parents=True)
    pending = PendingSave(STEP, 56, tmp, directory / "step_00000007", 0.0, 0, future)
    checkpointer._track(pending)
    return checkpointer, pending


def committed_steps(directory: Path) -> list[int]:
    return [step for step, _ in complete_checkpoints(directory)]


def recorded_commits(checkpointer: Checkpointer) -> list[str]:
    """The names of the threads the checkpointer's commits run in, from now on. Each commit takes a while (as an
    fsync and pruning do): a wide window for a second one to start beside it."""
    threads: list[str] = []
    commit = checkpointer.commits._commit

    def recorded(pending: PendingSave) -> None:
        threads.append(threading.current_thread().name)
        time.sleep(0.002)
        commit(pending)

    checkpointer.commits._commit = recorded
    return threads


def in_writer_thread(action: Callable[[], object]) -> threading.Thread:
    """DCP's writer thread (_ThreadBasedAsyncCheckpointExecutor) finishing the save: it sets the future's result."""
    thread = threading.Thread(target=action, name="AsyncCheckpointExecutor")
    thread.start()
    return thread


def test_the_save_is_committed_by_the_thread_that_completes_it_without_the_main_thread(tmp_path: Path) -> None:
    """The main thread makes no call after starting the save (as when it is blocked in a collective): the commit
    happens in the writer thread as the save completes."""
    future: Future = Future()
    checkpointer, _ = save_in_flight(tmp_path, future)
    committers = recorded_commits(checkpointer)
    assert committed_steps(tmp_path) == []
    in_writer_thread(lambda: future.set_result(None)).join()
    assert committed_steps(tmp_path) == [STEP]
    assert committers == ["AsyncCheckpointExecutor"]
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("caller", ["poll", "finish", "settle"])
def test_a_save_is_committed_exactly_once_when_the_main_thread_races_its_completion(
    caller: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # finish()'s, in a world of one
    monkeypatch.setattr("trainer.checkpoint.checkpointer.dist.barrier", lambda group=None: None)
    for attempt in range(25):
        directory = tmp_path / str(attempt)
        future: Future = Future()
        checkpointer, _ = save_in_flight(directory, future)
        committers = recorded_commits(checkpointer)
        start = threading.Barrier(2)
        writer = in_writer_thread(lambda future=future, start=start: (start.wait(), future.set_result(None)))
        start.wait()
        if caller == "poll":
            while checkpointer._pending is not None:
                checkpointer.poll()
        elif caller == "finish":
            checkpointer.finish()
        else:
            assert checkpointer.settle(wait_s=10) is True
        writer.join()
        checkpointer.poll()
        checkpointer.finish()
        assert checkpointer.settle(wait_s=0) is True
        assert len(committers) == 1, (attempt, committers)
        assert committed_steps(directory) == [STEP]


def test_a_save_abandoned_on_sigterm_stays_uncommitted_when_its_write_completes_later(tmp_path: Path) -> None:
    """settle() gave it up (the process is ending and said so): the writer thread finishing afterwards commits
    nothing."""
    future: Future = Future()
    checkpointer, _ = save_in_flight(tmp_path, future)
    assert checkpointer.settle(wait_s=0.01) is False
    in_writer_thread(lambda: future.set_result(None)).join()
    assert committed_steps(tmp_path) == []
    assert (tmp_path / "step_00000007.tmp").is_dir()


def test_a_failed_write_is_not_committed_and_is_raised_on_the_main_thread(tmp_path: Path) -> None:
    future: Future = Future()
    checkpointer, _ = save_in_flight(tmp_path, future)
    in_writer_thread(lambda: future.set_exception(RuntimeError("a rank's write failed"))).join()
    assert committed_steps(tmp_path) == []
    with pytest.raises(RuntimeError, match="a rank's write failed"):
        checkpointer.poll()


def test_rank_0_commits_a_save_whose_every_shard_is_written_though_the_save_then_failed(tmp_path: Path) -> None:
    """DCP writes .metadata only after gathering every rank's successful write; the broadcast of the result that
    follows can still fail (a peer that has left): the checkpoint is whole and is committed, the failure raised."""
    future: Future = Future()
    checkpointer, pending = save_in_flight(tmp_path, future)
    (pending.tmp / DCP_METADATA_FILE).write_bytes(b"")
    in_writer_thread(lambda: future.set_exception(RuntimeError("Connection closed by peer"))).join()
    assert committed_steps(tmp_path) == [STEP]
    with pytest.raises(RuntimeError, match="Connection closed by peer"):
        checkpointer.poll()


def test_a_commit_that_fails_in_the_writer_thread_is_raised_on_the_main_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(checkpoint: Path, meta: dict) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("trainer.checkpoint.checkpointer.write_meta", full_disk)
    future: Future = Future()
    checkpointer, _ = save_in_flight(tmp_path, future)
    in_writer_thread(lambda: future.set_result(None)).join()
    with pytest.raises(OSError, match="No space left"):
        checkpointer.poll()
    assert committed_steps(tmp_path) == []


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_background_save_is_committed_while_rank_0s_main_thread_is_blocked(tmp_path: Path) -> None:
    """Two gloo ranks; once rank 0 has started step 4's background save its main thread never returns to the
    training loop (tests/trainer/commit_probe.py): no poll, no finish, no SIGTERM handler. The checkpoint is still
    committed, by the save's own thread, once every rank's shards are written."""
    directory, output = tmp_path / "ckpt", tmp_path / "probe.txt"
    args = [*with_flags(TINY, checkpoint_dir=str(directory), checkpoint_every="2", timeout_minutes="1"),
            "--async-checkpoint"]  # fmt: skip
    probe_env = {"PROBE_HOLD_STEP": "4", "PROBE_HOLD_S": "45", "PROBE_OUTPUT": str(output)}
    run = run_trainer(args, tmp_path, nproc=2, module="tests.trainer.commit_probe", env=probe_env)
    assert output.read_text() == "committed", run.output
    assert committed_steps(directory) == [2, 4]
    assert not list(directory.glob("*.tmp"))


# --- the commit's renames: a step saved again never leaves a loadable half-deleted directory


def written_save(directory: Path, name: str, marker: str) -> Path:
    """A checkpoint directory as a save leaves it: a shard and meta.json, `marker` telling the saves apart."""
    path = directory / name
    path.mkdir(parents=True)
    (path / "__0_0.distcp").write_text(marker)
    (path / META_FILE).write_text("{}")
    return path


def test_a_step_saved_again_replaces_the_older_directory_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    final = written_save(tmp_path, "step_00000007", "old")
    commit_directory(written_save(tmp_path, "step_00000007.tmp", "new"), final)
    assert (final / "__0_0.distcp").read_text() == "new"
    assert leftover_directories(tmp_path) == []


def test_a_kill_between_the_renames_leaves_no_loadable_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    final = written_save(tmp_path, "step_00000007", "old")
    tmp = written_save(tmp_path, "step_00000007.tmp", "new")
    renames: list[tuple[Path, Path]] = []

    def killed_at_the_second(source: Path, target: Path) -> None:
        renames.append((source, target))
        if len(renames) == 2:
            raise KeyboardInterrupt("killed")
        original_rename(source, target)

    original_rename = os.rename
    monkeypatch.setattr(os, "rename", killed_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        commit_directory(tmp, final)
    assert committed_steps(tmp_path) == []  # the older copy is aside, the new one not yet in: nothing of step 7 loads
    assert [path.name for path in leftover_directories(tmp_path)] == ["step_00000007.superseded", "step_00000007.tmp"]


def test_a_kill_while_the_older_copy_is_deleted_leaves_the_new_step_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    final = written_save(tmp_path, "step_00000007", "old")
    monkeypatch.setattr(shutil, "rmtree", lambda path, ignore_errors=False: None)  # killed before any file went
    commit_directory(written_save(tmp_path, "step_00000007.tmp", "new"), final)
    assert committed_steps(tmp_path) == [STEP] and (final / "__0_0.distcp").read_text() == "new"
    assert [path.name for path in leftover_directories(tmp_path)] == ["step_00000007.superseded"]
