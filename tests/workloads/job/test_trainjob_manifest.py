"""The ClusterTrainingRuntime and TrainJob of every stack file run with job.api trainjob: valid for Kubeflow Trainer
v2's API (kubeflow-trainer-api 2.3.0 models) and for Kubernetes, asking each node for what the catalog says it has,
and running a command that torchrun and the trainer accept with the variables Trainer v2 sets."""

from __future__ import annotations

import copy
import re
from typing import Any

import kubernetes_validate
import pytest
from kubeflow_trainer_api.models import TrainerV1alpha1ClusterTrainingRuntime, TrainerV1alpha1TrainJob
from torch.distributed import run as torchrun

from sizing.catalog import CATALOG
from stack.config import KUBERNETES_VERSIONS
from trainer.base.flags.config import TrainConfig, parse_args
from trainer.base.pod.exits import FINAL_EXITS, LAUNCH_MODULE
from trainer.base.pod.gang_restarts import RESTART_ATTEMPT_VARIABLE, RESTART_LIMIT_VARIABLE
from trainer.base.pod.staging import STAGE_INPUTS_OPTION, split_launcher_options
from workloads.job.pytorchjob import pod_template, pytorchjob_manifest
from workloads.job.spec import JOIN_TIMEOUT_S
from workloads.job.trainjob import (
    ANCESTOR_LABEL,
    DISRUPTION_RULE,
    FAIL_RULE,
    NODE,
    TRAINER_V2_ENV,
    training_runtime,
    trainjob_manifest,
)

from .trainjob_stacks import STACKS, trainjob_config_of, trainjob_spec_of

pytestmark = pytest.mark.parametrize("stack", STACKS)

KUBERNETES_VERSION = KUBERNETES_VERSIONS[-1]


def runtime_of(stack: str) -> dict[str, Any]:
    return training_runtime(trainjob_spec_of(stack))


def node_job(stack: str) -> dict[str, Any]:
    (replicated,) = runtime_of(stack)["spec"]["template"]["spec"]["replicatedJobs"]
    return replicated


def node_pod(stack: str) -> dict[str, Any]:
    return node_job(stack)["template"]["spec"]["template"]


def node_container(stack: str) -> dict[str, Any]:
    (container,) = node_pod(stack)["spec"]["containers"]
    return container


def trainer_v2_env(stack: str, node_rank: int) -> dict[str, str]:
    """What the torch plugin sets on the node container (kubeflow/trainer v2.3.0 plugins/torch/torch.go)."""
    job = trainjob_manifest(trainjob_spec_of(stack))
    name, trainer = job["metadata"]["name"], job["spec"]["trainer"]
    return {
        "PET_NNODES": str(trainer["numNodes"]),
        "PET_NPROC_PER_NODE": str(trainer["numProcPerNode"]),
        "PET_NODE_RANK": str(node_rank),
        "PET_MASTER_ADDR": f"{name}-node-0-0.{name}",
        "PET_MASTER_PORT": "29500",
    }


def _round_trip(model: type[TrainerV1alpha1TrainJob | TrainerV1alpha1ClusterTrainingRuntime], obj: dict) -> dict:
    """The object read into the API's model and written back: a field the model lacks is dropped."""
    parsed = model.from_dict(obj)
    assert parsed is not None
    return parsed.to_dict()


def test_the_trainjob_round_trips_through_the_trainer_api_models(stack: str) -> None:
    job = trainjob_manifest(trainjob_spec_of(stack))
    assert _round_trip(TrainerV1alpha1TrainJob, job) == job


def test_the_runtime_round_trips_through_the_trainer_api_models(stack: str) -> None:
    runtime = runtime_of(stack)
    assert _round_trip(TrainerV1alpha1ClusterTrainingRuntime, runtime) == runtime


def test_the_round_trip_catches_a_field_the_api_does_not_have(stack: str) -> None:
    runtime = copy.deepcopy(runtime_of(stack))
    runtime["spec"]["mlPolicy"]["torch"]["numProcPerNode"] = 8  # removed in Trainer v2.2
    assert _round_trip(TrainerV1alpha1ClusterTrainingRuntime, runtime) != runtime


def test_the_node_pod_template_passes_the_strict_kubernetes_schema(stack: str) -> None:
    spec = trainjob_spec_of(stack)
    template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": spec.name}, "template": node_pod(stack)}
    kubernetes_validate.validate(template, KUBERNETES_VERSION, strict=True)


def test_the_node_job_template_passes_the_strict_kubernetes_schema(stack: str) -> None:
    spec = trainjob_spec_of(stack)
    job_spec = node_job(stack)["template"]["spec"]
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": spec.name}, "spec": job_spec}
    kubernetes_validate.validate(job, KUBERNETES_VERSION, strict=True)


def test_the_trainer_step_has_the_names_trainer_v2_looks_for(stack: str) -> None:
    replicated = node_job(stack)
    assert (replicated["name"], replicated["replicas"]) == (NODE, 1)
    assert replicated["template"]["metadata"]["labels"][ANCESTOR_LABEL] == "trainer"
    assert node_container(stack)["name"] == NODE
    job = trainjob_manifest(trainjob_spec_of(stack))
    assert job["spec"]["runtimeRef"]["name"] == runtime_of(stack)["metadata"]["name"]


def test_the_job_name_fits_jobsets_pod_names(stack: str) -> None:
    # JobSet rejects a JobSet whose "<name>-node-0-<index>-<5 chars>" pod names pass 63 characters
    # (kubernetes-sigs/jobset v0.12.0 pkg/webhooks/jobset_webhook.go); Trainer v2 does not check it first.
    spec = trainjob_spec_of(stack)
    assert len(f"{spec.name}-node-0-{spec.nodes - 1}-abcde") <= 63


def test_gpu_and_efa_requests_match_the_catalog(stack: str) -> None:
    config = trainjob_config_of(stack)
    instance = CATALOG[config.gpu_nodes.instance_type]
    limits = node_container(stack)["resources"]["limits"]
    trainer = trainjob_manifest(trainjob_spec_of(stack))["spec"]["trainer"]
    assert limits["nvidia.com/gpu"] == str(instance.gpus)
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (config.gpu_nodes.count, instance.gpus)
    assert runtime_of(stack)["spec"]["mlPolicy"]["numNodes"] == config.gpu_nodes.count
    if config.gpu_nodes.efa_enabled:
        assert limits["vpc.amazonaws.com/efa"] == str(instance.efa_interfaces)
    else:
        assert "vpc.amazonaws.com/efa" not in limits
    assert node_container(stack)["resources"]["requests"] == limits


def test_the_pod_is_the_pytorchjobs_pod_but_for_the_container_name_command_and_ports(stack: str) -> None:
    spec = trainjob_spec_of(stack)
    pytorchjob_pod = pod_template(spec)
    pod = copy.deepcopy(node_pod(stack))
    assert pod["spec"].pop("restartPolicy") == "Never"
    (ours,), (theirs,) = pod["spec"].pop("containers"), pytorchjob_pod["spec"].pop("containers")
    assert pod == pytorchjob_pod  # labels, init containers (staging), volumes, toleration, node selector
    for key in ("name", "command", "ports"):
        ours.pop(key)
        theirs.pop(key)
    gang = [entry for entry in ours["env"] if entry["name"] in (RESTART_ATTEMPT_VARIABLE, RESTART_LIMIT_VARIABLE)]
    ours["env"] = [entry for entry in ours["env"] if entry not in gang]
    assert ours == theirs  # env (HF token from the Secret), resources, volume mounts, security context
    assert len(gang) == 2  # and the JobSet restart attempt with its bound, the TrainJob's alone


def test_the_node_container_reads_jobsets_restart_attempt_and_its_bound(stack: str) -> None:
    spec = trainjob_spec_of(stack)
    env = {entry["name"]: entry for entry in node_container(stack)["env"]}
    label = env[RESTART_ATTEMPT_VARIABLE]["valueFrom"]["fieldRef"]["fieldPath"]
    assert label == "metadata.labels['jobset.sigs.k8s.io/restart-attempt']"  # jobset v0.12.0 constants.RestartsKey
    assert int(env[RESTART_LIMIT_VARIABLE]["value"]) == spec.max_restarts + spec.max_disruption_restarts


def test_no_variable_trainer_v2_reserves_is_set(stack: str) -> None:
    job = trainjob_manifest(trainjob_spec_of(stack))
    names = {e["name"] for e in [*node_container(stack)["env"], *job["spec"]["trainer"].get("env", [])]}
    assert names.isdisjoint(TRAINER_V2_ENV)


def test_torchrun_reads_the_trainjobs_numbers_and_rendezvouses_statically_on_node_0(
    stack: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = trainjob_spec_of(stack)
    command = trainjob_manifest(spec)["spec"]["trainer"]["command"]
    assert command[1:3] == ["-m", LAUNCH_MODULE]
    for name, value in trainer_v2_env(stack, node_rank=spec.nodes - 1).items():
        monkeypatch.setenv(name, value)
    _, torchrun_args = split_launcher_options(command[3:])  # the launcher's --stage-inputs, then torchrun's
    args = torchrun.parse_args(torchrun_args)
    config, _, _ = torchrun.config_from_args(args)
    assert (config.min_nodes, config.max_nodes, config.nproc_per_node) == (spec.nodes, spec.nodes, spec.node.gpus)
    assert config.rdzv_backend == "static"
    assert config.rdzv_endpoint == f"{spec.name}-node-0-0.{spec.name}:29500" == spec.rendezvous.endpoint
    assert config.rdzv_configs["rank"] == spec.nodes - 1
    assert config.rdzv_configs["timeout"] == str(JOIN_TIMEOUT_S)
    assert config.max_restarts == 0


def test_the_launcher_stages_the_inputs_in_the_node_container(stack: str) -> None:
    command = trainjob_manifest(trainjob_spec_of(stack))["spec"]["trainer"]["command"]
    assert command[3] == STAGE_INPUTS_OPTION


def test_the_trainer_parser_accepts_the_command_the_runtime_runs(stack: str) -> None:
    command = node_container(stack)["command"]
    assert command == trainjob_manifest(trainjob_spec_of(stack))["spec"]["trainer"]["command"]
    trainer_at = command.index("-m", 3) + 1
    assert command[trainer_at] == "trainer"
    assert isinstance(parse_args(command[trainer_at + 1 :]), TrainConfig)


def test_a_lost_pod_restarts_the_whole_gang_up_to_max_restarts(stack: str) -> None:
    spec = trainjob_spec_of(stack)
    jobset = runtime_of(stack)["spec"]["template"]["spec"]
    job = node_job(stack)["template"]["spec"]
    assert job["backoffLimit"] == 0  # any failed pod fails its Job ...
    assert jobset["failurePolicy"]["maxRestarts"] == spec.max_restarts  # ... and the JobSet recreates them all
    assert all(rule["onJobFailureReasons"] == ["PodFailurePolicy"] for rule in jobset["failurePolicy"]["rules"])


def test_the_jobsets_rule_names_are_ones_jobsets_webhook_accepts(stack: str) -> None:
    # kubernetes-sigs/jobset v0.12.0 pkg/webhooks/jobset_webhook.go validateFailurePolicy
    names = [rule["name"] for rule in runtime_of(stack)["spec"]["template"]["spec"]["failurePolicy"]["rules"]]
    assert all(re.fullmatch(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?", name) and len(name) <= 128 for name in names)
    assert len(set(names)) == len(names)


def test_every_final_launcher_exit_of_the_node_container_fails_its_job(stack: str) -> None:
    rules = node_job(stack)["template"]["spec"]["podFailurePolicy"]["rules"]
    exits = {"containerName": NODE, "operator": "In", "values": sorted(FINAL_EXITS)}
    assert rules[0] == {"action": "FailJob", "onExitCodes": exits}


def test_a_disrupted_pod_fails_its_job_by_its_condition(stack: str) -> None:
    rules = node_job(stack)["template"]["spec"]["podFailurePolicy"]["rules"]
    condition = {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    assert rules[-1] == condition  # after the final exits: a final exit is never turned into a restart


def test_the_jobset_fails_on_a_final_exit_and_restarts_uncounted_on_a_disruption(stack: str) -> None:
    rules = {
        rule["name"]: rule["action"] for rule in runtime_of(stack)["spec"]["template"]["spec"]["failurePolicy"]["rules"]
    }
    assert rules == {FAIL_RULE: "FailJobSet", DISRUPTION_RULE: "RestartJobSetAndIgnoreMaxRestarts"}


def test_pods_carry_the_stacks_labels_whichever_api_runs_them(stack: str) -> None:
    spec = trainjob_spec_of(stack)
    pytorchjob_labels = pytorchjob_manifest(spec)["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]
    assert node_pod(stack)["metadata"] == pytorchjob_labels
