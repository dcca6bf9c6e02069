"""`python -m trainer.launch`: how torchrun's end becomes an exit code the Training Operator reads right, and the
rendezvous it leaves open or closed.

The first tests take each way torchrun ends (the exception torch 2.13 raises for it) to its exit; the real runs
after them (a probe worker in the trainer's place, tests/trainer/launch_probe.py; a real etcd) show that those are
the exceptions that arrive, and what the next pod finds in the rendezvous.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import etcd
import pytest
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure
from torch.distributed.elastic.rendezvous import (
    RendezvousClosedError,
    RendezvousConnectionError,
    RendezvousParameters,
    RendezvousStateError,
    RendezvousTimeoutError,
)
from torch.distributed.elastic.rendezvous.registry import get_rendezvous_handler

from local.etcd import LocalEtcd, free_port
from tests.harness.listening import listening
from tests.harness.trainer_runs import ROOT, trainer_env
from tests.trainer.test_attempt import OneRound
from trainer.base.pod.attempt import ATTEMPT_ENV
from trainer.base.pod.exits import EXIT_BACKEND_LOST, EXIT_RENDEZVOUS_TIMEOUT, REASON_PREFIX, is_retryable
from trainer.launch.launcher import ending
from trainer.launch.rendezvous import HeldShutdown, held_rendezvous_shutdowns

# --- each way torchrun ends, and its exit


def child_failed() -> ChildFailedError:
    failure = ProcessFailure(local_rank=0, pid=4242, exitcode=-signal.SIGKILL, error_file="<N/A>")
    return ChildFailedError("trainer", {1: failure})


def test_a_finished_run_exits_0_and_closes_the_rendezvous() -> None:
    end = ending(None)
    assert (end.code, end.closes_rendezvous) == (0, True)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_stop_signal_exits_128_plus_the_signal_and_leaves_the_rendezvous_open(signum: int, code: int) -> None:
    end = ending(SignalException("stop", sigval=signal.Signals(signum)))
    assert (end.code, end.closes_rendezvous) == (code, False)
    assert is_retryable(end.code)


@pytest.mark.parametrize(
    "error",
    [
        RendezvousConnectionError("The connection to etcd has failed."),  # the etcd-v2 and c10d backends
        etcd.EtcdConnectionFailed("No more machines in the cluster"),  # the agent's EtcdStore
        etcd.EtcdClusterIdChanged("The UUID of the cluster changed"),  # an etcd that came back empty
    ],
)
def test_a_failed_rendezvous_backend_is_retryable_and_leaves_the_rendezvous_open(error: Exception) -> None:
    end = ending(error)
    assert (end.code, end.closes_rendezvous) == (EXIT_BACKEND_LOST, False)
    assert is_retryable(end.code) and EXIT_BACKEND_LOST - 128 > signal.SIGRTMAX  # not a signal's code


def test_workers_failed_past_max_restarts_is_permanent_and_names_the_first_failure() -> None:
    end = ending(child_failed())
    assert (end.code, end.closes_rendezvous) == (1, True)
    assert "--max-restarts is spent" in end.reason and "rank 1, signal SIGKILL" in end.reason
    assert end.line().startswith(f"{REASON_PREFIX}exit 1, permanent: ")


def test_a_closed_rendezvous_is_permanent() -> None:
    end = ending(RendezvousClosedError())
    assert end.code == 1 and "the rendezvous is closed" in end.reason


def test_a_rendezvous_that_timed_out_is_retryable_and_leaves_the_rendezvous_open() -> None:
    """A lost node's replacement still Pending when the join timeout passes must not fail the job for good."""
    end = ending(RendezvousTimeoutError("The node has not joined in time"))
    assert (end.code, end.closes_rendezvous) == (EXIT_RENDEZVOUS_TIMEOUT, False)
    assert is_retryable(end.code)
    assert end.line().startswith(f"{REASON_PREFIX}exit 202 (rendezvous timed out), retryable")


def test_a_round_whose_store_gives_no_attempt_id_timed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """Node 1 of a round whose node 0 never wrote the workers' attempt id: the store's timeout becomes the
    rendezvous' own, retryable, instead of an exception that exits 1 and closes the rendezvous."""
    server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=0.5))
    monkeypatch.setenv(ATTEMPT_ENV, "before")  # put back as it was after the test
    with pytest.raises(RendezvousTimeoutError, match="node 1 of 2 read no workers' attempt id") as raised:
        HeldShutdown(OneRound(dist.PrefixStore("torch.rendezvous.job.3", server), rank=1)).next_rendezvous()
    assert ending(raised.value).code == EXIT_RENDEZVOUS_TIMEOUT


@pytest.mark.parametrize("error", [RendezvousStateError("corrupt"), ValueError("bug")])
def test_anything_else_is_permanent_as_in_torchrun(error: Exception) -> None:
    end = ending(error)
    assert (end.code, end.closes_rendezvous) == (1, True)
    assert not is_retryable(end.code)


# --- the hold on torch's rendezvous shutdown


def c10d_parameters() -> RendezvousParameters:
    """A rendezvous whose store this process hosts: no etcd needed."""
    endpoint = f"127.0.0.1:{free_port()}"
    return RendezvousParameters("c10d", endpoint, "held", min_nodes=1, max_nodes=1, local_addr="127.0.0.1")


@pytest.fixture
def held() -> Iterator[HeldShutdown]:
    with held_rendezvous_shutdowns() as handlers:
        handler = get_rendezvous_handler(c10d_parameters())  # what launch_agent calls (launcher/api.py)
        assert handlers == [handler] and isinstance(handler, HeldShutdown)
        yield handler


def test_torchs_shutdown_is_held_until_the_launcher_decides(held: HeldShutdown) -> None:
    held.shutdown()  # launch_agent's `finally`
    assert not held.is_closed()
    assert held.finish(close=True) and held.is_closed()


def test_a_held_shutdown_is_never_carried_out_for_a_retryable_end(held: HeldShutdown) -> None:
    held.shutdown()
    assert not held.finish(close=False) and not held.is_closed()


def test_without_torchs_request_nothing_is_closed(held: HeldShutdown) -> None:
    assert not held.finish(close=True) and not held.is_closed()  # a stop signal: launch_agent skips shutdown


def test_torchs_registry_is_restored_afterwards() -> None:
    with held_rendezvous_shutdowns():
        pass
    assert not isinstance(get_rendezvous_handler(c10d_parameters()), HeldShutdown)


# --- real launches


def launch(*torchrun_args: str, marks: Path, worker: tuple[str, ...] = ()) -> subprocess.Popen[str]:
    """`python -m trainer.launch` with the probe as its worker, stderr captured."""
    command = [sys.executable, "-m", "trainer.launch", *torchrun_args, "-m", "tests.trainer.launch_probe"]
    env = {**trainer_env(), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [*command, "--marks", str(marks), *worker], cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def wait_for(marks: Path, prefix: str, process: subprocess.Popen[str]) -> None:
    while not list(marks.glob(f"{prefix}.*")):
        assert process.poll() is None, process.communicate()[0]
        time.sleep(0.1)


def finished(process: subprocess.Popen[str]) -> tuple[int, str]:
    output, _ = process.communicate(timeout=120)
    return process.returncode, output


def last_line(output: str) -> str:
    return output.strip().splitlines()[-1]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigterm_while_waiting_for_the_rendezvous_exits_143_itself(tmp_path: Path) -> None:
    """A pod deleted while its agent waits for the other nodes: exit 143 at once, by the launcher's own hand (a
    container's PID 1 ignores a signal it has no handler for; here Python would die of it, returncode -15)."""
    port = free_port()
    args = ["--nnodes=2:2", "--nproc-per-node=1", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}"]
    process = launch(*args, "--rdzv-id=waiting", "--local-addr=127.0.0.1", marks=tmp_path)
    try:
        while not listening(port):  # the agent hosts the c10d store, then waits in the rendezvous for a second node
            assert process.poll() is None, process.communicate()[0]
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        code, output = finished(process)
    finally:
        process.kill()
    assert code == 143, output
    assert last_line(output).startswith(f"{REASON_PREFIX}exit 143 (SIGTERM), retryable: stopped by SIGTERM")
    assert not list(tmp_path.glob("started.*"))


def etcd_launch(server: LocalEtcd, marks: Path, *worker: str) -> subprocess.Popen[str]:
    """One agent, elastic 1:1, on the etcd-v2 rendezvous 'probe'. A one-second keep-alive lets a dead agent's
    entry expire in 3 s rather than 15 (torch's defaults: 5 s, 3 missed)."""
    return launch(
        "--nnodes=1:1", "--nproc-per-node=1", "--rdzv-backend=etcd-v2", f"--rdzv-endpoint={server.endpoint}",
        "--rdzv-id=probe", "--rdzv-conf=join_timeout=60,keep_alive_interval=1", "--max-restarts=0",
        "--local-addr=127.0.0.1", marks=marks, worker=worker,
    )  # fmt: skip


@pytest.fixture(scope="module")
def lost_backend(rendezvous_etcd: LocalEtcd, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path]:
    """etcd restarted (its container: data kept) while the agent runs; the worker takes 8 s to settle after SIGTERM,
    so etcd is back before the agent's own way out, where torch would close the rendezvous."""
    marks = tmp_path_factory.mktemp("lost-backend")
    process = etcd_launch(rendezvous_etcd, marks, "--settle-seconds", "8")
    try:
        wait_for(marks, "started", process)
        rendezvous_etcd.restart(down_s=3.0, keep_data=True)
        code, output = finished(process)
    finally:
        process.kill()
    return code, output, marks


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_lost_backend_exits_retryable_after_the_worker_settled(lost_backend: tuple[int, str, Path]) -> None:
    code, output, marks = lost_backend
    assert code == EXIT_BACKEND_LOST, output
    assert "RendezvousConnectionError" in last_line(output) and "retryable" in last_line(output)
    assert list(marks.glob("settled.*")), "the worker was not given SIGTERM and its time to settle"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_pod_created_again_after_a_lost_backend_rejoins_and_finishes(
    lost_backend: tuple[int, str, Path], rendezvous_etcd: LocalEtcd, tmp_path: Path
) -> None:
    code, output = finished(etcd_launch(rendezvous_etcd, tmp_path, "--finish"))
    assert code == 0, output  # torchrun alone: RendezvousClosedError, exit 1, and the job could never resume
    assert last_line(output) == f"{REASON_PREFIX}exit 0, succeeded: the workers finished"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_pod_joining_a_finished_rendezvous_exits_1_saying_it_is_closed(
    lost_backend: tuple[int, str, Path], rendezvous_etcd: LocalEtcd, tmp_path: Path
) -> None:
    finished(etcd_launch(rendezvous_etcd, tmp_path / "first", "--finish"))  # finishes, and closes the rendezvous
    code, output = finished(etcd_launch(rendezvous_etcd, tmp_path / "second", "--finish"))
    assert code == 1, output
    assert last_line(output).startswith(f"{REASON_PREFIX}exit 1, permanent: the rendezvous is closed")
