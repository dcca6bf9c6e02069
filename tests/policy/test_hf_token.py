"""The Hugging Face token is in no Kubernetes object, and a job that trains a gated model names its Secrets Manager
secret (policy/hf_token.py)."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from policy.hf_token import hf_token_violations
from policy.props import UNKNOWN
from stack.files import load_stack_config
from tests.policy.examples import pytorchjob, set_trainer_flag, worker_container
from workloads.job.spec import job_spec
from workloads.job.trainjob import training_runtime

PYTORCHJOB = "kubernetes:kubeflow.org/v1:PyTorchJob"
RUNTIME = "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime"
SECRET = "kubernetes:core/v1:Secret"
TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"


def without_secret_name(job: dict[str, Any]) -> dict[str, Any]:
    env = worker_container(job)["env"]
    env[:] = [e for e in env if e["name"] != "HF_TOKEN_SECRET"]
    return job


def test_the_jobs_secret_name_passes() -> None:
    job = pytorchjob()  # p5-16: Llama 2 7B, gated, with job.hfTokenSecret
    assert any(e["name"] == "HF_TOKEN_SECRET" for e in worker_container(job)["env"])
    assert hf_token_violations(PYTORCHJOB, job) == []


@pytest.mark.parametrize("variable", ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"])
def test_a_literal_token_variable_fails(variable: str) -> None:
    job = pytorchjob()
    worker_container(job)["env"].append({"name": variable, "value": "anything"})
    (problem,) = hf_token_violations(PYTORCHJOB, job)
    assert variable in problem and "env[" in problem


def test_a_token_variable_from_a_kubernetes_secret_fails_too() -> None:
    job = pytorchjob()
    reference = {"secretKeyRef": {"name": "fsdp-p5-16-hf-token", "key": "token", "optional": True}}
    worker_container(job)["env"].append({"name": "HF_TOKEN", "valueFrom": reference})
    (problem,) = hf_token_violations(PYTORCHJOB, job)
    assert "HF_TOKEN" in problem and "Secrets Manager" in problem


def test_a_gated_model_without_the_secrets_name_fails() -> None:
    (problem,) = hf_token_violations(PYTORCHJOB, without_secret_name(pytorchjob()))
    assert "meta-llama/Llama-2-7b-hf" in problem and "HF_TOKEN_SECRET" in problem


def test_an_ungated_model_needs_no_secret_name() -> None:
    job = set_trainer_flag(without_secret_name(pytorchjob()), "--model", "tiny")
    assert hf_token_violations(PYTORCHJOB, job) == []


def test_an_env_unknown_at_preview_fails_closed_for_a_gated_model() -> None:
    job = pytorchjob()
    worker_container(job)["env"] = UNKNOWN
    (problem,) = hf_token_violations(PYTORCHJOB, job)
    assert "not known at preview" in problem


def test_a_command_unknown_at_preview_fails_closed_unless_the_secret_is_named() -> None:
    job = pytorchjob()
    worker_container(job)["command"] = UNKNOWN
    assert hf_token_violations(PYTORCHJOB, job) == []  # named: whatever it trains, it can read the token
    (problem,) = hf_token_violations(PYTORCHJOB, without_secret_name(job))
    assert "command is not known at preview" in problem


def test_a_trainjob_runtime_for_a_gated_model_needs_the_secrets_name() -> None:
    runtime = copy.deepcopy(training_runtime(job_spec(load_stack_config("p5-16"), image="registry.example/trainer:1")))
    assert hf_token_violations(RUNTIME, runtime) == []
    job = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    job["containers"][0]["env"] = [e for e in job["containers"][0]["env"] if e["name"] != "HF_TOKEN_SECRET"]
    (problem,) = hf_token_violations(RUNTIME, runtime)
    assert "HF_TOKEN_SECRET" in problem


def test_a_token_pasted_into_the_command_fails_and_is_not_repeated() -> None:
    job = pytorchjob()
    worker_container(job)["command"] += ["--hub-token", TOKEN]
    (problem,) = hf_token_violations(PYTORCHJOB, job)
    assert "command" in problem and TOKEN not in problem


def test_init_containers_and_other_workloads_are_checked() -> None:
    deployment = {
        "spec": {
            "template": {"spec": {"initContainers": [{"name": "fetch", "env": [{"name": "HF_TOKEN", "value": "x"}]}]}}
        }
    }
    assert hf_token_violations("kubernetes:apps/v1:Deployment", deployment)


def test_a_token_in_a_config_map_fails() -> None:
    assert hf_token_violations("kubernetes:core/v1:ConfigMap", {"data": {"HF_TOKEN": "x"}})


@pytest.mark.parametrize(
    "secret",
    [
        {"stringData": {"token": TOKEN}},
        {"data": {"token": base64.b64encode(TOKEN.encode()).decode()}},
        {"data": {"HF_TOKEN": base64.b64encode(b"anything").decode()}},
    ],
)
def test_a_kubernetes_secret_holding_the_token_fails_without_repeating_it(secret: dict[str, Any]) -> None:
    problems = hf_token_violations(SECRET, secret)
    assert problems and all(TOKEN not in p for p in problems)


def test_a_secret_of_something_else_passes() -> None:
    assert hf_token_violations(SECRET, {"data": {"password": base64.b64encode(b"not a token").decode()}}) == []


def test_cloud_resources_are_not_this_policys_business() -> None:
    assert hf_token_violations("aws:ssm/parameter:Parameter", {"value": TOKEN}) == []
