"""How the local run turns the stack's PyTorchJob into torchrun agents (pure functions; no process starts).

The manifest is the one `pulumi up` would create for the dev stack, made elastic 1:2 the way the local run does.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from local.config import local_stack_config
from local.launch import LocalPlan, ManifestError
from local.options import LocalJobOptions
from local.pytorchjob.launch import local_plan
from trainer.base.flags.config import parse_args, to_argv
from trainer.base.pod.staging import split_launcher_options
from workloads.job.pytorchjob import pytorchjob_manifest
from workloads.job.spec import job_spec

ETCD = "127.0.0.1:23790"
RUN_DIR = Path("/tmp/fsdp-eks-local-test")


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    config, _ = local_stack_config("dev", LocalJobOptions(nodes=2, min_nodes=1))
    return pytorchjob_manifest(job_spec(config))


@pytest.fixture(scope="module")
def plan(manifest: dict[str, Any]) -> LocalPlan:
    return local_plan(manifest, RUN_DIR, ETCD, metrics_port=19300)


def flags(argv: list[str]) -> dict[str, str]:
    """torchrun's flags; the launcher's own options (switches, before them) are not among them."""
    _, torchrun_args = split_launcher_options(argv[3 : argv.index("-m", 3)])
    return dict(arg[2:].split("=", 1) for arg in torchrun_args)


def test_each_worker_replica_gets_one_torchrun_agent(plan: LocalPlan) -> None:
    assert [agent.name for agent in plan.agents] == ["fsdp-dev-worker-0", "fsdp-dev-worker-1"]
    for agent in plan.agents:
        assert agent.argv[1:3] == ["-m", "trainer.launch"]  # the container's command: torchrun in the launcher
        assert agent.argv[agent.argv.index("-m", 3) + 1] == "trainer"


def test_each_agent_stages_the_inputs_first_as_the_pods_launcher_does(plan: LocalPlan) -> None:
    for agent in plan.agents:
        assert split_launcher_options(agent.argv[3:])[0].stage_inputs


def test_agents_get_the_operators_variables_from_the_elastic_policy(plan: LocalPlan, manifest: dict[str, Any]) -> None:
    policy = manifest["spec"]["elasticPolicy"]
    env = plan.agents[0].env
    assert env["PET_NNODES"] == f"{policy['minReplicas']}:{policy['maxReplicas']}" == "1:2"
    assert env["PET_MAX_RESTARTS"] == str(policy["maxRestarts"])
    assert env["PET_RDZV_BACKEND"] == "etcd-v2"
    assert env["PET_RDZV_CONF"] == "join_timeout=1800"


def test_command_flags_and_variables_agree_after_the_local_changes(plan: LocalPlan) -> None:
    agent = plan.agents[0]
    for name, value in flags(agent.argv).items():
        variable = "PET_" + name.upper().replace("-", "_")
        if variable in agent.env:
            assert agent.env[variable] == value, name


def test_rendezvous_is_the_local_etcd_with_one_worker_per_agent_on_loopback(plan: LocalPlan) -> None:
    launcher = flags(plan.agents[0].argv)
    assert launcher["rdzv-endpoint"] == ETCD
    assert launcher["nproc-per-node"] == "1"
    assert launcher["local-addr"] == "127.0.0.1"


def test_each_local_run_gets_a_fresh_rendezvous_id(manifest: dict[str, Any], plan: LocalPlan) -> None:
    again = local_plan(manifest, RUN_DIR, ETCD, metrics_port=19300)
    manifest_id = manifest["spec"]["elasticPolicy"]["rdzvId"]
    assert plan.rendezvous_id.startswith(manifest_id) and again.rendezvous_id.startswith(manifest_id)
    assert plan.rendezvous_id != again.rendezvous_id


def test_trainer_runs_on_cpu_with_metrics_on_loopback(plan: LocalPlan) -> None:
    assert plan.trainer.parallel.device == "cpu"
    assert plan.trainer.metrics.host == "127.0.0.1"
    assert plan.trainer.metrics.peak_tflops is None


def test_paths_in_volume_mounts_move_to_the_run_directory(plan: LocalPlan, manifest: dict[str, Any]) -> None:
    assert str(plan.trainer.checkpoint.directory).startswith(f"{RUN_DIR}/checkpoints/")
    assert str(plan.trainer.metrics.file).startswith(f"{RUN_DIR}/checkpoints/")
    # the run's staged Hugging Face cache and tokenised data live on the checkpoint volume (workloads/job/staging.py)
    assert plan.agents[0].env["HF_HOME"] == f"{RUN_DIR}/checkpoints/fsdp-dev/run-1/huggingface"
    assert str(plan.trainer.data.cache_dir) == f"{RUN_DIR}/checkpoints/fsdp-dev/run-1/data-cache"


def test_global_batch_is_the_same_at_every_node_count_of_the_elastic_range(plan: LocalPlan) -> None:
    schedule = plan.trainer.schedule
    assert schedule.global_batch_size is not None
    for ranks in (1, 2):
        assert schedule.global_batch_size % (schedule.batch_size * ranks) == 0


def with_token_secret() -> dict[str, Any]:
    """The dev stack's manifest with the token's Secrets Manager secret named, as a gated model's stack does."""
    config, _ = local_stack_config("dev", LocalJobOptions(nodes=2, min_nodes=1))
    named = dataclasses.replace(config, job=dataclasses.replace(config.job, hf_token_secret="fsdp-eks/hf-token"))
    return pytorchjob_manifest(job_spec(named))


def test_the_token_is_this_machines_hf_token_and_no_aws_secret_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_local_test_token")
    monkeypatch.setenv("HF_TOKEN_SECRET", "left/over")  # not even one from this machine's environment
    plan = local_plan(with_token_secret(), RUN_DIR, ETCD, metrics_port=19300)
    assert plan.agents[0].env["HF_TOKEN"] == "hf_local_test_token"
    assert "HF_TOKEN_SECRET" not in plan.agents[0].env
    (line,) = [change for change in plan.changes if change.startswith("Hugging Face token")]
    assert "this machine's HF_TOKEN" in line and "fsdp-eks/hf-token" in line and "hf_local_test_token" not in line


def test_a_stack_without_a_token_secret_says_nothing_about_the_token(plan: LocalPlan) -> None:
    assert not [change for change in plan.changes if change.startswith("Hugging Face token")]


def test_a_command_that_disagrees_with_the_elastic_policy_is_refused(manifest: dict[str, Any]) -> None:
    broken = copy.deepcopy(manifest)
    command = broken["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["command"]
    command[command.index("--nnodes=1:2")] = "--nnodes=2:2"
    with pytest.raises(ManifestError, match="--nnodes=2:2 disagrees with the operator's PET_NNODES=1:2"):
        local_plan(broken, RUN_DIR, ETCD, metrics_port=19300)


def test_local_changes_pass_the_stacks_own_rules_for_a_multi_node_elastic_job() -> None:
    config, overrides = local_stack_config("dev", LocalJobOptions(nodes=2, min_nodes=1))
    assert (config.gpu_nodes.count, config.job.min_nodes) == (2, 1)
    assert config.job.global_batch_size is not None and config.job.checkpoint_claim is not None
    assert {override.setting for override in overrides} >= {"gpuNodes.count", "job.minNodes"}


def test_trainer_arguments_are_the_manifests_apart_from_the_printed_changes(
    plan: LocalPlan, manifest: dict[str, Any]
) -> None:
    container = manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    changed = {line.split()[1] for line in plan.changes if line.startswith("trainer ")}

    def unchanged(args: list[str]) -> list[str]:
        kept, skip = [], False
        for token in args:
            if skip or token in changed:
                skip = token in changed
                continue
            kept.append(token)
        return kept

    manifest_args = container["command"][container["command"].index("trainer") + 1 :]
    local_args = plan.agents[0].argv[plan.agents[0].argv.index("trainer") + 1 :]
    assert unchanged(local_args) == unchanged(manifest_args)


def test_the_trainer_command_is_rendered_from_the_agents_trainer_config(manifest: dict[str, Any]) -> None:
    """Not the manifest's strings edited in place: a manifest with its trainer flags in another order gives the same
    command, the trainer's own rendering of the config the agents run."""
    reordered = copy.deepcopy(manifest)
    command = reordered["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["command"]
    trainer_at = command.index("trainer") + 1
    first_flag = command[trainer_at : trainer_at + 2]  # a flag and its value
    assert not first_flag[1].startswith("--")
    command[trainer_at:] = [*command[trainer_at + 2 :], *first_flag]
    for agent in local_plan(reordered, RUN_DIR, ETCD, metrics_port=19300).agents:
        assert agent.argv[agent.argv.index("trainer") + 1 :] == to_argv(agent.trainer)
        assert parse_args(to_argv(agent.trainer)) == agent.trainer
