"""The Training Operator's exit-code rule with init containers (kubeflow/trainer v1.9.4, pkg/controller.v1/common/pod.go
ReconcilePods, modelled in local/pytorchjob/restart_policy.py), and every stack's PyTorchJob run through it: each
container failing in turn, no failure that a new pod cannot cure may create the pod again without end."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest

from local.config import local_stack_config
from local.launch import ManifestError
from local.options import LocalJobOptions
from local.pytorchjob.launch import local_plan
from local.pytorchjob.restart_policy import (
    DEFAULT_CONTAINER,
    POD_FAILED,
    POD_RUNNING,
    UNKNOWN_EXIT,
    Action,
    ContainerStatus,
    PodStatus,
    container_exit,
    operator_exit_code,
    pod_outcome,
    recreation_loops,
)
from tests.workloads.job.job_stacks import STACKS, spec_of
from trainer.base.pod.exits import EXIT_NO_SPACE, EXIT_STAGING_FAILED, PERMANENT_EXITS, is_retryable
from workloads.job.pod import PREPARE_CHECKPOINTS
from workloads.job.pytorchjob import CONTAINER_PERMANENT_EXITS, pytorchjob_manifest
from workloads.job.spec import job_spec

BACKOFF_LIMIT = 3
POD = {"initContainers": [{"name": "stage-inputs"}], "containers": [{"name": DEFAULT_CONTAINER}]}


def failed_in_init(code: int) -> PodStatus:
    """A pod whose init container failed: the kubelet never started the main container."""
    return PodStatus(POD_FAILED, (ContainerStatus("stage-inputs", code),), (ContainerStatus(DEFAULT_CONTAINER),))


def test_the_operator_reads_the_exit_code_of_the_pytorch_container_only() -> None:
    status = PodStatus(POD_FAILED, (), (ContainerStatus("sidecar", 1), ContainerStatus(DEFAULT_CONTAINER, 143)))
    assert operator_exit_code(status) == 143


def test_an_init_containers_code_is_never_read_and_0xbeef_is_taken_instead() -> None:
    assert operator_exit_code(failed_in_init(EXIT_STAGING_FAILED)) == UNKNOWN_EXIT == 48879
    assert is_retryable(UNKNOWN_EXIT)


def test_a_failed_init_container_gets_the_pod_created_again_under_exit_code_whatever_its_code() -> None:
    outcome = pod_outcome("ExitCode", failed_in_init(EXIT_STAGING_FAILED), 100, BACKOFF_LIMIT)
    assert outcome is not None and outcome.action is Action.RECREATE
    assert "init container stage-inputs exited 4" in outcome.why and "0xbeef" in outcome.why


def test_the_same_code_from_the_pytorch_container_fails_the_job() -> None:
    status = PodStatus(POD_FAILED, (ContainerStatus("stage-inputs", 0),), (ContainerStatus(DEFAULT_CONTAINER, 4),))
    outcome = pod_outcome("ExitCode", status, 0, BACKOFF_LIMIT)
    assert outcome is not None and outcome.action is Action.FAIL_JOB


def test_the_operator_does_nothing_with_a_pod_that_has_not_failed() -> None:
    assert pod_outcome("ExitCode", PodStatus(POD_RUNNING, (), (ContainerStatus(DEFAULT_CONTAINER),)), 0, 3) is None


def test_under_on_failure_a_failing_init_container_restarts_in_place_without_end() -> None:
    # The pod stays Pending; PastBackoffLimit counts the restarts of Running pods only (pkg/core/job.go).
    outcome = container_exit("OnFailure", POD, "stage-inputs", 1, restarts=BACKOFF_LIMIT * 10, backoff_limit=3)
    assert outcome is not None and outcome.action is Action.RESTART


def test_the_pytorch_containers_exit_is_judged_by_its_code() -> None:
    assert container_exit("ExitCode", POD, DEFAULT_CONTAINER, EXIT_NO_SPACE, 0, 3).action is Action.FAIL_JOB  # type: ignore[union-attr]
    assert container_exit("ExitCode", POD, DEFAULT_CONTAINER, 143, 0, 3).action is Action.RECREATE  # type: ignore[union-attr]
    assert container_exit("ExitCode", POD, DEFAULT_CONTAINER, 0, 0, 3).action is Action.SUCCEED  # type: ignore[union-attr]


# --- the check over rendered jobs


def with_init_container(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    """The manifest with one more init container, as the job had before staging moved into the launcher."""
    changed = copy.deepcopy(manifest)
    pod = changed["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    pod["initContainers"] = [*pod.get("initContainers", []), {"name": name, "image": "x", "command": ["true"]}]
    return changed


@pytest.mark.parametrize("stack", STACKS)
def test_no_containers_permanent_failure_creates_the_pod_again_without_end(stack: str) -> None:
    """Every container of the stack's worker pod failing in turn, with each code it ends with for good."""
    assert recreation_loops(pytorchjob_manifest(spec_of(stack)), CONTAINER_PERMANENT_EXITS) == []


@pytest.mark.parametrize("stack", STACKS)
def test_every_permanent_exit_of_the_launcher_fails_the_job(stack: str) -> None:
    manifest = pytorchjob_manifest(spec_of(stack))
    assert CONTAINER_PERMANENT_EXITS[DEFAULT_CONTAINER] == PERMANENT_EXITS
    pod = manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    for code in PERMANENT_EXITS:
        assert container_exit("ExitCode", pod, DEFAULT_CONTAINER, code, 0, BACKOFF_LIMIT).action is Action.FAIL_JOB  # type: ignore[union-attr]


@pytest.mark.parametrize("stack", STACKS)
def test_the_check_refuses_a_job_whose_init_container_could_fail_for_good(stack: str) -> None:
    manifest = with_init_container(pytorchjob_manifest(spec_of(stack)), "stage-inputs")
    (loop,) = recreation_loops(manifest, CONTAINER_PERMANENT_EXITS)
    assert (loop.container, loop.outcome.action) == ("stage-inputs", Action.RECREATE)
    assert "0xbeef" in loop.describe()


def test_the_check_refuses_a_permanent_code_that_a_container_would_be_retried_on() -> None:
    manifest = pytorchjob_manifest(spec_of("dev"))
    (loop,) = recreation_loops(manifest, {DEFAULT_CONTAINER: (1, 200)})  # 200 said to be permanent: it is retried
    assert (loop.container, loop.code) == (DEFAULT_CONTAINER, 200)


def test_the_local_run_refuses_a_job_that_would_loop_on_the_cluster(tmp_path: Path) -> None:
    config, _ = local_stack_config("dev", LocalJobOptions())
    manifest = with_init_container(pytorchjob_manifest(job_spec(config)), "stage-inputs")
    with pytest.raises(ManifestError, match="stage-inputs failing for good"):
        local_plan(manifest, tmp_path, "127.0.0.1:2379", metrics_port=9300)


@pytest.mark.parametrize("stack", [s for s in STACKS if spec_of(s).checkpoint.shared][:1])
def test_prepare_checkpoints_says_what_failed_and_exits_0_on_a_volume_it_cannot_write(
    stack: str, tmp_path: Path
) -> None:
    """Its claim in CONTAINER_PERMANENT_EXITS (none), shown by running its command on a volume that refuses it."""
    pod = pytorchjob_manifest(spec_of(stack))["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    (container,) = [c for c in pod["initContainers"] if c["name"] == PREPARE_CHECKPOINTS]
    volume = tmp_path / "checkpoints"
    volume.write_text("")  # a volume where no directory can be made (as root too: ENOTDIR, not a permission)
    shell, flag, script = container["command"]
    result = subprocess.run([shell, flag, script.replace("/checkpoints", str(volume))], capture_output=True, text=True)
    assert result.returncode == 0
    assert f"{PREPARE_CHECKPOINTS}: could not create {volume}/" in result.stderr
