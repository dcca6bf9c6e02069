"""The Hugging Face token reaches pods only through a Secret."""

from __future__ import annotations

import pytest

from policy.hf_token import hf_token_violations
from tests.policy.examples import pytorchjob, worker_container

PYTORCHJOB = "kubernetes:kubeflow.org/v1:PyTorchJob"
TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"


def test_the_jobs_secret_reference_passes() -> None:
    assert hf_token_violations(PYTORCHJOB, pytorchjob()) == []


@pytest.mark.parametrize("variable", ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"])
def test_a_literal_token_variable_fails(variable: str) -> None:
    job = pytorchjob()
    worker_container(job)["env"].append({"name": variable, "value": "anything"})
    (problem,) = hf_token_violations(PYTORCHJOB, job)
    assert variable in problem and "env[" in problem


def test_replacing_the_secret_reference_with_a_value_fails() -> None:
    job = pytorchjob()
    env = worker_container(job)["env"]
    token = next(e for e in env if e["name"] == "HF_TOKEN")
    token.pop("valueFrom")
    token["value"] = ""  # even empty: the variable is meant to come from the Secret
    assert hf_token_violations(PYTORCHJOB, job)


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


def test_the_secret_itself_is_where_the_token_belongs() -> None:
    assert hf_token_violations("kubernetes:core/v1:Secret", {"stringData": {"token": TOKEN}}) == []


def test_cloud_resources_are_not_this_policys_business() -> None:
    assert hf_token_violations("aws:ssm/parameter:Parameter", {"value": TOKEN}) == []
