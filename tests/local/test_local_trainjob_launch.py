"""How the local run turns the stack's TrainJob and runtime into torchrun agents, and what the JobSet does after a
pod's exit (pure functions; no process starts). The objects are the ones `pulumi up` would create for the dev stack
with job.api trainjob on two nodes."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from torch.distributed import run as torchrun

from local.cli import parse_args
from local.config import local_stack_config
from local.launch import LocalPlan, ManifestError
from local.options import LocalJobOptions, LocalOptions, LocalRunError
from local.run import job_api, run_local
from local.trainjob import api as trainjob_api
from local.trainjob.api import describe_policy
from local.trainjob.jobset_policy import GangOutcome, JobSetRestarts, Verdict, gang_outcome
from local.trainjob.launch import trainjob_plan, with_gang_restart
from local.trainjob.pod_failure_policy import pod_exit
from stack.job_api import PYTORCHJOB, TRAINJOB
from trainer.base.pod.exits import EXIT_BAD_ARGUMENTS, EXIT_PERMANENT, exit_for_signal
from trainer.base.pod.gang_restarts import RESTART_ATTEMPT_VARIABLE
from trainer.base.pod.staging import split_launcher_options
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
    _, torchrun_args = split_launcher_options(agent.argv[3:])
    config, _, _ = torchrun.config_from_args(torchrun.parse_args(torchrun_args))
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
    again = with_gang_restart(plan, MASTER_PORT + 1, restarts=1)
    assert {agent.env["PET_MASTER_PORT"] for agent in again.agents} == {str(MASTER_PORT + 1)}
    assert [a.env["PET_NODE_RANK"] for a in again.agents] == [a.env["PET_NODE_RANK"] for a in plan.agents]


def test_each_gang_reads_the_jobsets_restart_attempt_as_its_label_gives_it(plan: LocalPlan) -> None:
    """The node container's JOBSET_RESTART_ATTEMPT is the pod's restart-attempt label on the cluster (the downward
    API); here the runner's model of the JobSet sets it, 0 for the first gang."""
    assert {agent.env[RESTART_ATTEMPT_VARIABLE] for agent in plan.agents} == {"0"}
    again = with_gang_restart(plan, MASTER_PORT + 1, restarts=2)
    assert {agent.env[RESTART_ATTEMPT_VARIABLE] for agent in again.agents} == {"2"}


def test_a_command_that_sets_trainer_v2s_numbers_itself_is_refused(objects: tuple[dict, dict]) -> None:
    runtime, trainjob = copy.deepcopy(objects[0]), copy.deepcopy(objects[1])
    trainjob["spec"]["trainer"]["command"].insert(3, "--nnodes=1")
    with pytest.raises(ManifestError, match="--nnodes"):
        trainjob_plan(runtime, trainjob, RUN_DIR, metrics_port=19300, master_port=MASTER_PORT)


def outcome(runtime: dict[str, Any], code: int, restarts: int = 0) -> GangOutcome:
    (replicated,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    pod = pod_exit(replicated["template"]["spec"]["template"]["spec"], "fsdp-dev-node-0-1", "training", "node", code)
    return gang_outcome(runtime, [pod], JobSetRestarts(restarts, restarts))


def test_the_header_states_the_runtimes_rules(objects: tuple[dict, dict]) -> None:
    lines = describe_policy(objects[0])
    assert "podFailurePolicy rule 0: container node exit In [2, 3, 4, 6] -> FailJob" in lines
    assert "podFailurePolicy rule 1: condition DisruptionTarget=True -> FailJob" in lines
    assert "JobSet rule finalExit: FailJobSet" in lines


def test_without_the_jobset_rules_a_final_exit_is_restarted_like_anything_else(objects: tuple[dict, dict]) -> None:
    runtime = copy.deepcopy(objects[0])
    runtime["spec"]["template"]["spec"]["failurePolicy"]["rules"] = []
    assert outcome(runtime, EXIT_BAD_ARGUMENTS).verdict is Verdict.RESTART


def test_without_a_failure_policy_the_first_failure_fails_the_jobset(objects: tuple[dict, dict]) -> None:
    runtime = copy.deepcopy(objects[0])
    del runtime["spec"]["template"]["spec"]["failurePolicy"]
    assert outcome(runtime, exit_for_signal(9)).verdict is Verdict.FAIL


@pytest.mark.parametrize("code", [exit_for_signal(9), exit_for_signal(15), EXIT_PERMANENT, 200])
def test_any_other_failure_restarts_the_whole_gang_while_restarts_are_left(
    objects: tuple[dict, dict], code: int
) -> None:
    max_restarts = objects[0]["spec"]["template"]["spec"]["failurePolicy"]["maxRestarts"]
    assert outcome(objects[0], code).verdict is Verdict.RESTART
    assert outcome(objects[0], code, restarts=max_restarts).verdict is Verdict.FAIL


def test_bad_launcher_arguments_fail_the_jobset_at_once(objects: tuple[dict, dict]) -> None:
    assert outcome(objects[0], EXIT_BAD_ARGUMENTS).verdict is Verdict.FAIL


def test_a_runtime_the_jobset_webhook_refuses_is_refused_before_anything_starts(
    objects: tuple[dict, dict], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = copy.deepcopy(objects[0])
    runtime["spec"]["template"]["spec"]["failurePolicy"]["rules"][0]["name"] = "bad-launch-arguments"
    monkeypatch.setattr(trainjob_api, "training_runtime", lambda spec: runtime)
    options = LocalOptions(stack="dev", job=LocalJobOptions(nodes=2, api="trainjob"), work_dir=tmp_path)
    with pytest.raises(LocalRunError, match="invalid failure policy rule name 'bad-launch-arguments'"):
        run_local(options)
    assert not (tmp_path / "logs").exists()


def test_the_cli_runs_a_trainjob_when_asked_and_the_pytorchjob_by_default() -> None:
    assert job_api(parse_args(["--stack", "dev", "--api", "trainjob"])) == TRAINJOB
    assert job_api(parse_args(["--stack", "dev"])) == PYTORCHJOB  # make demo


def test_the_header_says_where_the_token_comes_from_when_the_runtime_names_its_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As the PyTorchJob's local run does: the runtime names a Secrets Manager secret, which the local run does not
    read; this machine's HF_TOKEN stands in, and the header says so without printing it."""
    monkeypatch.setenv("HF_TOKEN", "hf_local_test_token")
    config, _ = local_stack_config("dev", LocalJobOptions(nodes=2, api="trainjob"))
    named = dataclasses.replace(config, job=dataclasses.replace(config.job, hf_token_secret="fsdp-eks/hf-token"))
    spec = job_spec(named)
    plan = trainjob_plan(
        training_runtime(spec), trainjob_manifest(spec), RUN_DIR, metrics_port=19300, master_port=MASTER_PORT
    )
    (line,) = [change for change in plan.changes if change.startswith("Hugging Face token")]
    assert "this machine's HF_TOKEN" in line and "fsdp-eks/hf-token" in line and "hf_local_test_token" not in line
    assert all("HF_TOKEN_SECRET" not in agent.env for agent in plan.agents)
