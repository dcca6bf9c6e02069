"""The model and data set on the hub, through huggingface_hub against a hub that answers as the real one: there,
gated or not, and for a gated one whether this token's account accepted the licence."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from preflight.hub import HubApi, hub_findings
from stack.config import StackConfig
from stack.files import load_stack_config
from tests.preflight.fake_hub import Hub, Repo, fake_hub

LLAMA = "meta-llama/Llama-3.1-8B"
ACCEPTED, NOT_ACCEPTED = "hf_accepted", "hf_not_accepted"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Hub, HubApi]]:
    from huggingface_hub import HfApi

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    state = Hub(
        repos={
            ("model", LLAMA): Repo(gated="manual", allowed={ACCEPTED}),
            ("model", "Qwen/Qwen2.5-7B"): Repo(),
            ("model", "acme/private-llama"): Repo(private=True, allowed={ACCEPTED}),
            ("dataset", "knkarthick/dialogsum"): Repo(),
        },
        tokens={ACCEPTED, NOT_ACCEPTED},
    )
    with fake_hub(state) as endpoint:
        yield state, HfApi(endpoint=endpoint)


def stack(model: str = LLAMA, dataset: str = "knkarthick/dialogsum") -> StackConfig:
    config = load_stack_config("p5-2")
    return replace(config, job=replace(config.job, model=model, dataset=dataset))


def test_a_gated_model_whose_licence_the_tokens_account_accepted_passes(hub: tuple[Hub, HubApi]) -> None:
    findings = hub_findings(stack(), hub[1], ACCEPTED)
    assert [(f.check, f.level) for f in findings] == [("model", "ok"), ("data set", "ok")]
    assert "(manual): this token's account has access" in findings[0].what


def test_a_licence_not_accepted_is_a_problem_quoting_the_hub_with_where_to_accept(hub: tuple[Hub, HubApi]) -> None:
    (finding, _) = hub_findings(stack(), hub[1], NOT_ACCEPTED)
    assert finding.level == "problem"
    assert "you are not in the authorized list" in finding.what
    assert finding.fix == (
        f"accept the licence at https://huggingface.co/{LLAMA} with that account and wait for the approval email "
        "(approved by hand)"
    )


def test_a_gated_model_without_a_token_here_is_a_problem_naming_the_secret(hub: tuple[Hub, HubApi]) -> None:
    (finding, _) = hub_findings(stack(), hub[1], None)
    assert finding.level == "problem" and "is gated (manual)" in finding.what
    assert finding.fix == "export HF_TOKEN=<the token fsdp-eks/hf-token holds> and run this again"


def test_an_unknown_token_is_a_problem(hub: tuple[Hub, HubApi]) -> None:
    (finding, _) = hub_findings(stack(), hub[1], "hf_revoked")
    assert finding.level == "problem" and "Invalid credentials in Authorization header" in finding.what


def test_a_model_not_on_the_hub_is_a_problem(hub: tuple[Hub, HubApi]) -> None:
    (finding, _) = hub_findings(stack(model="meta-llama/Llama-9-1B"), hub[1], ACCEPTED)
    assert finding.level == "problem" and "no model meta-llama/Llama-9-1B on the hub" in finding.what


def test_a_private_model_the_token_reaches_passes(hub: tuple[Hub, HubApi]) -> None:
    (finding, _) = hub_findings(stack(model="acme/private-llama"), hub[1], ACCEPTED)
    assert finding.level == "ok" and "(private)" in finding.what


def test_an_ungated_model_needs_no_token(hub: tuple[Hub, HubApi]) -> None:
    state, api = hub
    (finding, _) = hub_findings(stack(model="Qwen/Qwen2.5-7B"), api, None)
    assert finding.level == "ok" and "not gated" in finding.what
    assert not any(call.endswith("/auth-check") for call in state.calls)


def test_a_preset_is_checked_for_its_tokenizers_repository(hub: tuple[Hub, HubApi]) -> None:
    (finding, _) = hub_findings(stack(model="llama3.1-8b"), hub[1], NOT_ACCEPTED)
    assert finding.level == "problem" and LLAMA in finding.what


def test_a_data_set_not_on_the_hub_is_a_problem(hub: tuple[Hub, HubApi]) -> None:
    (_, finding) = hub_findings(stack(dataset="acme/no-such-data"), hub[1], ACCEPTED)
    assert (finding.check, finding.level) == ("data set", "problem")
    assert "no data set acme/no-such-data on the hub" in finding.what


def test_s3_inputs_and_the_synthetic_data_ask_the_hub_nothing(hub: tuple[Hub, HubApi]) -> None:
    state, api = hub
    assert hub_findings(stack(model="s3://acme/models/llama/", dataset="s3://acme/train.jsonl"), api, None) == []
    assert hub_findings(stack(model="s3://acme/models/llama/", dataset="synthetic"), api, None) == []
    assert state.calls == []
