"""What the local run does when a worker pod's agent exits: the Training Operator's rules per restartPolicy
(local/pytorchjob/restart_policy.py), and the policy the local run reads from the manifest."""

from __future__ import annotations

import copy
import signal
from pathlib import Path
from typing import Any

import pytest

from local.config import local_stack_config
from local.launch import ManifestError
from local.options import LocalJobOptions
from local.pod_status import container_exit_code
from local.pytorchjob.launch import local_plan
from local.pytorchjob.restart_policy import Action, exit_outcome
from trainer.base.pod.exits import EXIT_BACKEND_LOST, EXIT_PERMANENT, exit_for_signal
from workloads.job.pytorchjob import RESTART_POLICY, pytorchjob_manifest
from workloads.job.spec import job_spec

BACKOFF_LIMIT = 3


def action(policy: str, code: int, restarts: int = 0, backoff_limit: int = BACKOFF_LIMIT) -> Action:
    return exit_outcome(policy, code, restarts, backoff_limit).action


def test_a_process_killed_by_a_signal_reports_128_plus_the_signal() -> None:
    assert container_exit_code(-9) == 137
    assert container_exit_code(-15) == 143
    assert container_exit_code(1) == 1


@pytest.mark.parametrize("code", [1, 2, 127])
def test_exit_code_fails_the_job_on_codes_up_to_127(code: int) -> None:
    assert action("ExitCode", code) is Action.FAIL_JOB


@pytest.mark.parametrize("code", [128, 137, 143, 255])
def test_exit_code_creates_the_pod_again_on_codes_from_128(code: int) -> None:
    # The operator re-creates such pods whatever the count so far: backoffLimit only acts when it is 0.
    assert action("ExitCode", code, restarts=10) is Action.RECREATE


def test_the_launchers_codes_fall_in_the_classes_the_operator_knows() -> None:
    assert action("ExitCode", exit_for_signal(signal.SIGTERM)) is Action.RECREATE  # a pod deleted or evicted
    assert action("ExitCode", EXIT_BACKEND_LOST) is Action.RECREATE  # etcd lost
    assert action("ExitCode", EXIT_PERMANENT) is Action.FAIL_JOB  # restarts spent, or the rendezvous closed


def test_a_lost_backend_is_named_in_the_pods_event() -> None:
    assert exit_outcome("ExitCode", EXIT_BACKEND_LOST, 0, BACKOFF_LIMIT).why.startswith(
        "exited 200 (rendezvous backend lost), a retryable code"
    )


def test_exit_code_with_backoff_limit_zero_fails_on_a_signal_too() -> None:
    assert action("ExitCode", 137, backoff_limit=0) is Action.FAIL_JOB


def test_on_failure_restarts_in_place_until_the_restarts_reach_the_backoff_limit() -> None:
    # The operator fails the job when the pods' restart counts add up to backoffLimit: the exit that would be
    # restart number backoffLimit ends it.
    assert action("OnFailure", 1, restarts=BACKOFF_LIMIT - 2) is Action.RESTART
    assert action("OnFailure", 1, restarts=BACKOFF_LIMIT - 1) is Action.FAIL_JOB
    assert action("OnFailure", 1, restarts=0, backoff_limit=0) is Action.FAIL_JOB


def test_never_fails_the_job_on_any_non_zero_code() -> None:
    assert action("Never", 137) is Action.FAIL_JOB


@pytest.mark.parametrize("policy", ["ExitCode", "OnFailure", "Never"])
def test_exit_0_is_success(policy: str) -> None:
    assert action(policy, 0) is Action.SUCCEED


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="restartPolicy 'Sometimes'"):
        exit_outcome("Sometimes", 1, 0, BACKOFF_LIMIT)


def dev_manifest() -> dict[str, Any]:
    config, _ = local_stack_config("dev", LocalJobOptions())
    return pytorchjob_manifest(job_spec(config))


def test_the_local_run_follows_the_manifests_restart_policy(tmp_path: Path) -> None:
    plan = local_plan(dev_manifest(), tmp_path, "127.0.0.1:2379", metrics_port=9300)
    assert plan.restart_policy == RESTART_POLICY == "ExitCode"


def test_the_local_run_refuses_a_restart_policy_the_operator_does_not_know(tmp_path: Path) -> None:
    manifest = copy.deepcopy(dev_manifest())
    manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = "Sometimes"
    with pytest.raises(ManifestError, match="restartPolicy 'Sometimes'"):
        local_plan(manifest, tmp_path, "127.0.0.1:2379", metrics_port=9300)
