"""The admission of a TrainJob run, modelled from JobSet v0.12.0's and Kubeflow Trainer v2.3.0's webhooks and the Job
API's validation (local/trainjob/admission.py and the modules it runs): every stack's rendered runtime and TrainJob
pass it, and each check refuses an object that breaks its rule, one rule per test, on the dev stack's objects."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from local.modelled_fields import UnmodelledFieldError
from local.trainjob.admission import AdmissionError, admit
from local.trainjob.jobset_policy import JobSetRestarts, gang_outcome
from local.trainjob.jobset_webhook import admit_jobset, defaulted, jobset_problems, trainer_jobset
from local.trainjob.trainer_webhooks import runtime_problems, trainjob_problems
from tests.workloads.job.trainjob_stacks import STACKS, trainjob_spec_of
from workloads.job.trainjob import training_runtime, trainjob_manifest

Objects = tuple[dict[str, Any], dict[str, Any]]


def objects_of(stack: str) -> Objects:
    spec = trainjob_spec_of(stack)
    return training_runtime(spec), trainjob_manifest(spec)


@pytest.fixture
def objects() -> Objects:
    return copy.deepcopy(objects_of("dev"))


def rules(runtime: dict[str, Any]) -> list[dict[str, Any]]:
    return runtime["spec"]["template"]["spec"]["failurePolicy"]["rules"]


def node(runtime: dict[str, Any]) -> dict[str, Any]:
    (replicated,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    return replicated


def jobset_refusals(runtime: dict[str, Any], trainjob: dict[str, Any]) -> list[str]:
    return jobset_problems(defaulted(trainer_jobset(runtime, trainjob)))


@pytest.mark.parametrize("stack", STACKS)
def test_every_stacks_runtime_and_trainjob_pass_every_admission_step(stack: str) -> None:
    runtime, trainjob = objects_of(stack)
    jobset = admit(runtime, trainjob)
    assert jobset["metadata"]["name"] == trainjob["metadata"]["name"]


@pytest.mark.parametrize("stack", STACKS)
def test_the_jobset_runs_one_indexed_job_with_a_pod_per_node(stack: str) -> None:
    runtime, trainjob = objects_of(stack)
    (replicated,) = admit_jobset(trainer_jobset(runtime, trainjob))["spec"]["replicatedJobs"]
    job = replicated["template"]["spec"]
    nodes = trainjob["spec"]["trainer"]["numNodes"]
    assert (job["completionMode"], job["completions"], job["parallelism"]) == ("Indexed", nodes, nodes)
    assert job["template"]["spec"]["restartPolicy"] == "Never"  # the runtime's, not the webhook's OnFailure


# --- JobSet v0.12.0 pkg/webhooks/jobset_webhook.go


def test_the_old_rule_name_with_hyphens_is_refused(objects: Objects) -> None:
    rules(objects[0])[0]["name"] = "bad-launch-arguments"
    (problem,) = jobset_refusals(*objects)
    assert problem.startswith("invalid failure policy rule name 'bad-launch-arguments'")


def test_a_rule_name_ending_in_a_colon_is_refused(objects: Objects) -> None:
    rules(objects[0])[0]["name"] = "finalExit:"
    assert len(jobset_refusals(*objects)) == 1


def test_a_rule_name_with_a_trailing_newline_is_refused(objects: Objects) -> None:
    rules(objects[0])[0]["name"] = "finalExit\n"  # Go's $ is the end of the text, not of a line
    assert len(jobset_refusals(*objects)) == 1


def test_a_rule_name_longer_than_128_characters_is_refused(objects: Objects) -> None:
    rules(objects[0])[0]["name"] = "a" * 129
    (problem,) = jobset_refusals(*objects)
    assert problem.startswith("invalid failure policy rule name of length 129")


def test_two_rules_with_one_name_are_refused(objects: Objects) -> None:
    rules(objects[0])[1]["name"] = rules(objects[0])[0]["name"]
    (problem,) = jobset_refusals(*objects)
    assert problem.startswith("rule names are not unique, rules with indices [0, 1]")


def test_jobsets_webhook_names_a_jobsets_rule_without_a_name_by_its_index(objects: Objects) -> None:
    jobset = trainer_jobset(*objects)
    del jobset["spec"]["failurePolicy"]["rules"][1]["name"]  # a JobSet created as such, not from a runtime
    assert admit_jobset(jobset)["spec"]["failurePolicy"]["rules"][1]["name"] == "failurePolicyRule1"


def test_a_job_failure_reason_jobs_never_give_is_refused(objects: Objects) -> None:
    rules(objects[0])[0]["onJobFailureReasons"] = ["PodFailed"]
    (problem,) = jobset_refusals(*objects)
    assert problem == "invalid job failure reason 'PodFailed' in failure policy is not a recognized job failure reason"


def test_an_action_jobset_does_not_have_is_refused(objects: Objects) -> None:
    rules(objects[0])[0]["action"] = "Restart"
    (problem,) = jobset_refusals(*objects)
    assert "Unsupported value: 'Restart'" in problem


def test_restart_job_is_refused_without_its_feature_gate(objects: Objects) -> None:
    rules(objects[0])[1]["action"] = "RestartJobAndIgnoreMaxRestarts"
    (problem,) = jobset_refusals(*objects)
    assert "RestartJob feature gate is disabled" in problem


def test_a_rule_targeting_a_replicated_job_the_jobset_lacks_is_refused(objects: Objects) -> None:
    rules(objects[0])[0]["targetReplicatedJobs"] = ["trainer"]
    (problem,) = jobset_refusals(*objects)
    assert problem.startswith("invalid replicatedJob name 'trainer' in failure policy")


def test_a_trainjob_name_whose_pod_names_pass_63_characters_is_refused(objects: Objects) -> None:
    objects[1]["metadata"]["name"] = "f" * 50  # f...f-node-0-0-abcde: 65 characters
    (problem,) = jobset_refusals(*objects)
    assert problem.endswith("pod names generated for this JobSet will exceed 63 characters")


def test_a_trainjob_name_whose_job_names_pass_63_characters_is_refused(objects: Objects) -> None:
    objects[1]["metadata"]["name"] = "f" * 57  # f...f-node-0: 64 characters
    assert any(
        p.endswith("job names generated for this JobSet will exceed 63 characters") for p in jobset_refusals(*objects)
    )


def test_a_group_name_that_is_not_a_dns_label_is_refused(objects: Objects) -> None:
    node(objects[0])["groupName"] = "Trainers"
    (problem,) = jobset_refusals(*objects)
    assert problem.startswith("'Trainers': a DNS-1035 label")


def test_depends_on_for_the_first_replicated_job_is_refused(objects: Objects) -> None:
    node(objects[0])["dependsOn"] = [{"name": "node", "status": "Ready"}]
    assert "DependsOn can't be set for the first ReplicatedJob" in jobset_refusals(*objects)


def test_in_place_restart_is_refused_without_its_feature_gate(objects: Objects) -> None:
    objects[0]["spec"]["template"]["spec"]["failurePolicy"]["restartStrategy"] = "InPlaceRestart"
    (problem,) = jobset_refusals(*objects)
    assert problem.startswith("InPlaceRestart restart strategy cannot be set")


# --- Kubeflow Trainer v2.3.0 pkg/webhooks and the CRDs


def test_a_trainer_step_with_two_replicas_is_refused(objects: Objects) -> None:
    node(objects[0])["replicas"] = 2
    (problem,) = runtime_problems(objects[0])
    assert problem.endswith("always must be 1")


def test_a_trainer_step_without_a_node_container_is_refused(objects: Objects) -> None:
    node(objects[0])["template"]["spec"]["template"]["spec"]["containers"][0]["name"] = "trainer"
    (problem,) = runtime_problems(objects[0])
    assert problem.endswith("must contain the required container for the ancestor: trainer")


def test_a_runtime_rule_without_a_name_is_refused_by_the_runtimes_crd(objects: Objects) -> None:
    del rules(objects[0])[1]["name"]  # the CRD requires it; JobSet's webhook, which would name it, comes later
    assert runtime_problems(objects[0]) == ["spec.template.spec.failurePolicy.rules[1].name: Required value"]
    with pytest.raises(AdmissionError, match="ClusterTrainingRuntime admission refuses"):
        admit(*objects)


def test_two_ml_policies_are_refused(objects: Objects) -> None:
    objects[0]["spec"]["mlPolicy"]["mpi"] = {}
    assert runtime_problems(objects[0]) == ["spec.mlPolicy: Only one of the policy can be configured"]


def test_a_trainjob_before_its_runtime_is_refused(objects: Objects) -> None:
    (problem,) = trainjob_problems(objects[1], {})
    assert problem.endswith("specified clusterTrainingRuntime must be created before the TrainJob is created")


def test_a_runtime_reference_to_a_kind_trainer_does_not_serve_is_refused(objects: Objects) -> None:
    objects[1]["spec"]["runtimeRef"]["kind"] = "TrainingRuntimes"
    assert trainjob_problems(objects[1], {objects[0]["metadata"]["name"]: objects[0]}) == [
        "unsupported runtime: TrainingRuntimes.trainer.kubeflow.org"
    ]


def test_a_trainjob_setting_a_variable_the_torch_plugin_reserves_is_refused(objects: Objects) -> None:
    objects[1]["spec"]["trainer"]["env"] = [{"name": "PET_NNODES", "value": "2"}]
    (problem,) = trainjob_problems(objects[1], {objects[0]["metadata"]["name"]: objects[0]})
    assert problem == "spec.trainer.env: must not have reserved envs, invalid envs configured: ['PET_NNODES']"


def test_a_trainjob_name_that_is_not_an_rfc_1035_label_is_refused(objects: Objects) -> None:
    objects[1]["metadata"]["name"] = "9fsdp"
    assert trainjob_problems(objects[1], {objects[0]["metadata"]["name"]: objects[0]}) == [
        "metadata.name must match RFC 1035 DNS label format"
    ]


def test_a_trainer_command_of_more_than_128_items_is_refused(objects: Objects) -> None:
    objects[1]["spec"]["trainer"]["command"] += ["--x"] * 128
    (problem,) = trainjob_problems(objects[1], {objects[0]["metadata"]["name"]: objects[0]})
    assert problem == "spec.trainer.command: must have at most 128 items"


def test_an_env_injection_target_the_runtime_lacks_is_refused(objects: Objects) -> None:
    objects[0]["spec"]["mlPolicy"]["torch"]["envInjection"] = {
        "targets": [{"jobName": "node", "containerNames": ["x"]}]
    }
    (problem,) = trainjob_problems(objects[1], {objects[0]["metadata"]["name"]: objects[0]})
    assert "container 'x' not found in runtime template" in problem


# --- the steps in order


def test_admission_stops_at_the_jobset_webhook_with_its_message(objects: Objects) -> None:
    rules(objects[0])[0]["name"] = "bad-launch-arguments"
    with pytest.raises(
        AdmissionError, match=r"JobSet v0\.12\.0's webhook refuses fsdp-dev: invalid failure policy rule"
    ):
        admit(*objects)


def test_admission_checks_each_child_job_against_the_job_api(objects: Objects) -> None:
    node(objects[0])["template"]["spec"]["podFailurePolicy"]["rules"][0]["onExitCodes"]["containerName"] = "trainer"
    with pytest.raises(AdmissionError, match=r"the Job API \(batch/v1\) refuses fsdp-dev-node-0: .*containerName"):
        admit(*objects)


# --- the models refuse to pass over a field they do not read (local/modelled_fields.py)


def jobset_spec(runtime: dict[str, Any]) -> dict[str, Any]:
    return runtime["spec"]["template"]["spec"]


UNMODELLED: dict[str, Any] = {
    "spec.startupPolicy": lambda rt, job: jobset_spec(rt).update(startupPolicy={"startupPolicyOrder": "InOrder"}),
    "spec.network.enableDNSHostnames": lambda rt, job: jobset_spec(rt).update(network={"enableDNSHostnames": True}),
    "spec.successPolicy": lambda rt, job: jobset_spec(rt).update(successPolicy={"operator": "Any"}),
    "spec.failurePolicy.restartStrategy='BlockingRecreate'": lambda rt, job: jobset_spec(rt)["failurePolicy"].update(
        restartStrategy="BlockingRecreate"
    ),
    "spec.replicatedJobs[0].template.spec.activeDeadlineSeconds": lambda rt, job: node(rt)["template"]["spec"].update(
        activeDeadlineSeconds=3600
    ),
    "ClusterTrainingRuntime.spec.mlPolicy.torch.numProcPerNode": lambda rt, job: rt["spec"]["mlPolicy"]["torch"].update(
        numProcPerNode=4
    ),
    "TrainJob.spec.trainer.args": lambda rt, job: job["spec"]["trainer"].update(args=["--steps", "5"]),
}


@pytest.mark.parametrize("path", UNMODELLED)
def test_an_admitted_object_with_a_field_no_model_reads_is_refused_naming_it(objects: Objects, path: str) -> None:
    UNMODELLED[path](*objects)
    with pytest.raises(UnmodelledFieldError) as raised:
        admit(*objects)
    assert raised.value.paths == [path]


def test_the_failure_policy_model_refuses_a_runtime_with_a_field_it_does_not_read(objects: Objects) -> None:
    node(objects[0])["template"]["spec"]["backoffLimitPerIndex"] = 1
    with pytest.raises(UnmodelledFieldError, match="backoffLimitPerIndex"):
        gang_outcome(objects[0], [], JobSetRestarts())
