"""`python -m trainer.launch --stage-inputs`: the run's inputs staged in the pod's main container before torchrun
starts, so that a staging failure no retry can cure is the launcher's exit 4 with its reason, which fails the job, and
not an init container's failure, which the operator retries without end (trainer/base/pod/staging.py)."""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.http_stand_in import serving
from tests.harness.trainer_runs import ROOT, TINY, trainer_env, with_flags
from trainer.base.pod import hub_token
from trainer.base.pod.exits import EXIT_BAD_ARGUMENTS, EXIT_STAGING_FAILED, REASON_PREFIX
from trainer.base.pod.hub_token import SECRET_VARIABLE, TOKEN_VARIABLE, SecretRead
from trainer.base.pod.staging import (
    STAGE_INPUTS_OPTION,
    Staged,
    split_launcher_options,
    staging_environment,
    trainer_flags,
)
from trainer.launch import launcher
from trainer.launch.agent import STOP_SIGNALS
from trainer.launch.launcher import staging_ending

LAUNCH = ["--standalone", "--nnodes=1", "--nproc-per-node=1", "--max-restarts=2"]


def test_the_launchers_own_options_come_before_torchruns() -> None:
    options, rest = split_launcher_options([STAGE_INPUTS_OPTION, "--nnodes=1", "-m", "trainer", "--model", "tiny"])
    assert options.stage_inputs and rest == ["--nnodes=1", "-m", "trainer", "--model", "tiny"]
    assert not split_launcher_options(["--nnodes=1"])[0].stage_inputs


def test_the_trainers_flags_are_those_after_dash_m_trainer() -> None:
    assert trainer_flags(True, "trainer", ["--model", "tiny"]) == ["--model", "tiny"]
    assert trainer_flags(True, "tests.trainer.launch_probe", []) is None
    assert trainer_flags(False, "trainer", []) is None  # a script named trainer, not the module


def test_staging_is_online_while_the_workers_stay_offline() -> None:
    env = staging_environment({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": "/x", "HF_TOKEN": "t"})
    assert env == {"HF_HOME": "/x", "HF_TOKEN": "t"}


def test_staged_inputs_let_torchrun_start() -> None:
    assert staging_ending(Staged(0, "")) is None


@pytest.mark.parametrize(
    ("staged", "code", "said"),
    [
        (Staged(EXIT_STAGING_FAILED, "error: --dataset x: no such file"), 4, "exited 4): error: --dataset x"),
        (Staged(1, "OSError: [Errno 5] Input/output error"), 4, "exited 1): OSError"),
        (Staged(-signal.SIGKILL, ""), 4, "killed by SIGKILL"),
        (Staged(EXIT_BAD_ARGUMENTS, "error: unrecognized arguments: --x"), 2, "parser refused its flags"),
    ],
)
def test_every_staging_failure_is_final_and_says_why(staged: Staged, code: int, said: str) -> None:
    end = staging_ending(staged)
    assert end is not None and (end.code, end.closes_rendezvous) == (code, False)
    assert said in end.reason and end.line().startswith(f"{REASON_PREFIX}exit {code}")


def launch(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "trainer.launch", *args]
    run_env = {**trainer_env(), **(env or {})}
    return subprocess.run(command, cwd=ROOT, env=run_env, capture_output=True, text=True, timeout=240)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_data_set_that_is_not_there_exits_4_with_the_reason_before_any_rendezvous(tmp_path: Path) -> None:
    trainer = with_flags(TINY, dataset=str(tmp_path / "missing.jsonl"), data_cache_dir=str(tmp_path / "data"))
    result = launch([STAGE_INPUTS_OPTION, *LAUNCH, "-m", "trainer", *trainer])
    assert result.returncode == EXIT_STAGING_FAILED, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{REASON_PREFIX}exit 4 (staging failed), permanent: staging the inputs failed for good")
    assert f"--dataset {tmp_path / 'missing.jsonl'}: no such file" in last
    assert "rendezvous" not in result.stderr.lower()  # torchrun never started


class GatedHub(http.server.BaseHTTPRequestHandler):
    """The Hugging Face hub's answer for a gated repository asked without a token (huggingface_hub/utils/_http.py:
    401 with X-Error-Code GatedRepo)."""

    def do_GET(self) -> None:
        self.send_response(401)
        self.send_header("X-Error-Code", "GatedRepo")
        self.send_header("X-Error-Message", "Access to model fsdp-eks-test/gated is restricted.")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self) -> None:
        self.do_GET()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def gated_hub() -> Iterator[str]:
    with serving(GatedHub) as url:
        yield url


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_gated_model_without_a_token_exits_4_naming_the_model(tmp_path: Path, gated_hub: str) -> None:
    trainer = with_flags(TINY, model="fsdp-eks-test/gated", tokenizer="byte", data_cache_dir=str(tmp_path / "data"))
    env = {"HF_ENDPOINT": gated_hub, "HF_HOME": str(tmp_path / "hf")}
    result = launch([STAGE_INPUTS_OPTION, *LAUNCH, "-m", "trainer", *trainer], env)
    assert result.returncode == EXIT_STAGING_FAILED, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "--model fsdp-eks-test/gated: cannot fetch config.json from the Hugging Face hub" in last
    assert "Access to model fsdp-eks-test/gated is restricted" in last


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_after_staging_torchrun_trains_on_the_staged_data(tmp_path: Path) -> None:
    trainer = with_flags(TINY, steps="1", warmup_steps="0", data_cache_dir=str(tmp_path / "data"))
    result = launch([STAGE_INPUTS_OPTION, *LAUNCH, "-m", "trainer", *trainer])
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "data" / ".staged.json").read_text())["model"] is None  # the tiny preset
    assert result.stderr.strip().splitlines()[-1].startswith(f"{REASON_PREFIX}exit 0")


def test_staging_needs_the_trainer_to_stage_for() -> None:
    result = launch([STAGE_INPUTS_OPTION, *LAUNCH, "-m", "tests.trainer.launch_probe", "--marks", "/tmp/x"])
    assert result.returncode == EXIT_BAD_ARGUMENTS
    assert f"{STAGE_INPUTS_OPTION} stages the trainer's inputs" in result.stderr


class SlowHub(http.server.BaseHTTPRequestHandler):
    """A hub that never answers in time: staging is still downloading when the pod is stopped."""

    asked = threading.Event()

    def do_HEAD(self) -> None:
        SlowHub.asked.set()
        time.sleep(60)

    def do_GET(self) -> None:
        self.do_HEAD()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigterm_while_staging_stops_staging_and_exits_143(tmp_path: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), SlowHub)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    trainer = with_flags(TINY, model="fsdp-eks-test/slow", tokenizer="byte", data_cache_dir=str(tmp_path / "data"))
    env = {**trainer_env(), "HF_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}", "HF_HOME": str(tmp_path)}
    command = [sys.executable, "-m", "trainer.launch", STAGE_INPUTS_OPTION, *LAUNCH, "-m", "trainer", *trainer]
    launcher = subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert SlowHub.asked.wait(120), "staging never asked the hub"
        launcher.send_signal(signal.SIGTERM)  # the kubelet stopping the pod: PID 1 only
        _, stderr = launcher.communicate(timeout=60)
    finally:
        launcher.kill()
        server.shutdown()
    assert launcher.returncode == 143, stderr
    assert stderr.strip().splitlines()[-1].startswith(f"{REASON_PREFIX}exit 143 (SIGTERM), retryable: stopped by")


@pytest.fixture
def launcher_signals() -> Iterator[None]:
    """stage_then_launch installs its own SIGTERM and SIGINT handlers (and ignores both once torchrun is over):
    this process's are put back afterwards."""
    saved = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def test_the_secrets_token_reaches_staging_and_never_the_workers(
    monkeypatch: pytest.MonkeyPatch, launcher_signals: None
) -> None:
    """The launcher reads the secret, staging (which downloads) gets the token, torchrun's workers (offline on what
    was staged) do not, not even the one the container was given directly."""
    seen: dict[str, str | None] = {}
    monkeypatch.setenv(SECRET_VARIABLE, "fsdp-eks/hf-token")
    monkeypatch.setenv(TOKEN_VARIABLE, "hf_the_containers_own")
    monkeypatch.setattr(hub_token, "_get_secret_value", lambda secret, region: SecretRead("hf_from_the_secret"))

    def staged(flags: list[str], environ: dict[str, str]) -> Staged:
        seen["staging"] = environ.get(TOKEN_VARIABLE)
        return Staged(0, "")

    monkeypatch.setattr(launcher, "stage_inputs", staged)
    monkeypatch.setattr(launcher.torchrun, "main", lambda argv: seen.update(workers=os.environ.get(TOKEN_VARIABLE)))
    end, error = launcher.stage_then_launch([*LAUNCH, "-m", "trainer", "--model", "tiny"], stage=True)
    assert (end.code, error) == (0, None)
    assert seen == {"staging": "hf_from_the_secret", "workers": None}


def test_without_staging_the_workers_download_and_get_the_token(
    monkeypatch: pytest.MonkeyPatch, launcher_signals: None
) -> None:
    seen: dict[str, str | None] = {}
    monkeypatch.setenv(SECRET_VARIABLE, "fsdp-eks/hf-token")
    monkeypatch.delenv(TOKEN_VARIABLE, raising=False)
    monkeypatch.setattr(hub_token, "_get_secret_value", lambda secret, region: SecretRead("hf_from_the_secret"))
    monkeypatch.setattr(launcher.torchrun, "main", lambda argv: seen.update(workers=os.environ.get(TOKEN_VARIABLE)))
    launcher.stage_then_launch([*LAUNCH, "-m", "trainer", "--model", "tiny"], stage=False)
    assert seen == {"workers": "hf_from_the_secret"}
