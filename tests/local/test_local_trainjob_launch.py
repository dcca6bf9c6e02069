"""How the local run turns the stack's TrainJob and runtime into torchrun agents, and what the JobSet does after a
pod's exit (pure functions; no process starts). The objects are the ones `pulumi up` would create for the dev stack
with job.api trainjob on two nodes."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from torch.distributed import run as torchrun

from local.cli import parse_args, runs_trainjob
from local.config import LocalJobOptions, local_stack_config
from local.jobset_policy import gang_outcome, gang_policy
from local.launch import LocalPlan, ManifestError
from local.restart_policy import Action
from local.trainjob_launch import trainjob_plan, with_master_port
from trainer.launch_exits import EXIT_BAD_ARGUMENTS, EXIT_PERMANENT, exit_for_signal
from workloads.job.spec import job_spec
from workloads.job.trainjob import training_runtime, trainjob_manifest

RUN_DIR = Path("/tmp/fsdp-eks-local-test")
MASTER_PORT = 29555


@pytest.fixture(scope="module")
def objects() -> tuple[dict[str, Any], dict[str, Any]]:
    config, _ = local_stack_config("dev", LocalJobOptions(nodes=2, api="trainjob"))
    spec = job_spec(config)
    return training_runtime(spec), trainjob_manifest(spec)


@pytest.fixture(scope="module")
def plan(objects: tuple[dict[str, Any], dict[str, Any]]) -> LocalPlan:
    return trainjob_plan(*objects, RUN_DIR, metrics_port=19300, master_port=MASTER_PORT)


def test_each_node_gets_one_agent_named_as_its_pod(plan: LocalPlan) -> None:
    assert [agent.name for agent in plan.agents] == ["fsdp-dev-node-0-0", "fsdp-dev-node-0-1"]


def test_each_agent_gets_trainer_v2s_variables_with_its_own_node_rank(plan: LocalPlan) -> None:
    for rank, agent in enumerate(plan.agents):
        pet = {k: v for k, v in agent.env.items() if k.startswith("PET_")}
        assert pet == {
            "PET_NNODES": "2",
            "PET_NPROC_PER_NODE": "1",
            "PET_NODE_RANK": str(rank),
            "PET_MASTER_ADDR": "127.0.0.1",
            "PET_MASTER_PORT": str(MASTER_PORT),
        }


def test_torchrun_reads_a_static_rendezvous_on_node_0_from_them(
    plan: LocalPlan, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = plan.agents[1]
    for name, value in agent.env.items():
        if name.startswith("PET_"):
            monkeypatch.setenv(name, value)
    config, _, _ = torchrun.config_from_args(torchrun.parse_args(agent.argv[3:]))
    assert (config.min_nodes, config.max_nodes, config.rdzv_backend) == (2, 2, "static")
    assert config.rdzv_endpoint == f"127.0.0.1:{MASTER_PORT}"
    assert config.rdzv_configs["rank"] == 1


def test_the_agents_run_the_trainjobs_command_with_the_local_trainer_changes(
    plan: LocalPlan, objects: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    command = objects[1]["spec"]["trainer"]["command"]
    argv = plan.agents[0].argv
    assert argv[3 : argv.index("-m", 3)] == command[3 : command.index("-m", 3)]  # the launcher's flags as given
    assert plan.trainer.parallel.device == "cpu"
    assert str(plan.trainer.checkpoint.directory).startswith(str(RUN_DIR))


def test_a_restarted_gang_meets_on_a_fresh_port(plan: LocalPlan) -> None:
    again = with_master_port(plan, MASTER_PORT + 1)
    assert {agent.env["PET_MASTER_PORT"] for agent in again.agents} == {str(MASTER_PORT + 1)}
    assert [a.env["PET_NODE_RANK"] for a in again.agents] == [a.env["PET_NODE_RANK"] for a in plan.agents]


def test_a_command_that_sets_trainer_v2s_numbers_itself_is_refused(objects: tuple[dict, dict]) -> None:
    runtime, trainjob = copy.deepcopy(objects[0]), copy.deepcopy(objects[1])
    trainjob["spec"]["trainer"]["command"].insert(3, "--nnodes=1")
    with pytest.raises(ManifestError, match="--nnodes"):
        trainjob_plan(runtime, trainjob, RUN_DIR, metrics_port=19300, master_port=MASTER_PORT)


def test_the_gang_policy_is_read_from_the_runtime(objects: tuple[dict, dict]) -> None:
    policy = gang_policy(objects[0])
    assert policy.max_restarts == objects[0]["spec"]["template"]["spec"]["failurePolicy"]["maxRestarts"]
    assert policy.fail_codes == {EXIT_BAD_ARGUMENTS}


def test_without_the_jobset_rule_bad_arguments_are_restarted_like_anything_else(objects: tuple[dict, dict]) -> None:
    runtime = copy.deepcopy(objects[0])
    runtime["spec"]["template"]["spec"]["failurePolicy"]["rules"] = []
    assert gang_policy(runtime).fail_codes == frozenset()


def test_without_a_failure_policy_the_first_failure_fails_the_jobset(objects: tuple[dict, dict]) -> None:
    runtime = copy.deepcopy(objects[0])
    del runtime["spec"]["template"]["spec"]["failurePolicy"]
    assert gang_outcome(gang_policy(runtime), exit_for_signal(9), restarts=0).action is Action.FAIL_JOB


@pytest.mark.parametrize("code", [exit_for_signal(9), exit_for_signal(15), EXIT_PERMANENT, 200])
def test_any_other_failure_restarts_the_whole_gang_while_restarts_are_left(
    objects: tuple[dict, dict], code: int
) -> None:
    policy = gang_policy(objects[0])
    assert gang_outcome(policy, code, restarts=0).action is Action.RECREATE
    assert gang_outcome(policy, code, restarts=policy.max_restarts).action is Action.FAIL_JOB


def test_bad_launcher_arguments_fail_the_jobset_at_once(objects: tuple[dict, dict]) -> None:
    assert gang_outcome(gang_policy(objects[0]), EXIT_BAD_ARGUMENTS, restarts=0).action is Action.FAIL_JOB


def test_the_cli_runs_a_trainjob_when_asked_and_the_pytorchjob_by_default() -> None:
    assert runs_trainjob(parse_args(["--stack", "dev", "--api", "trainjob"]))
    assert not runs_trainjob(parse_args(["--stack", "dev"]))  # make demo
