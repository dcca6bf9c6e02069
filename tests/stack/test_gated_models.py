"""`pulumi preview` refuses a job whose model is a gated Hugging Face repository when the stack has no token,
naming the key to set (stack/gated_models.py); a model that needs no token passes, and so does every stack file read
without the engine, which never sees secrets."""

from __future__ import annotations

from typing import Any

import pytest

from stack.fields import ConfigError
from stack.files import raw_stack_config, stack_names
from stack.gated_models import gated_repo, hf_token_problems
from stack.parse import parse_stack_config
from tests.harness.pulumi_program import run_program

TOKEN_KEY = "fsdp-eks:hfToken"
STACK = "p5-1"  # one p5.48xlarge: a 7B model fits, so the token is the only problem


def engine_raw(model: str, token: str | None = None) -> dict[str, Any]:
    """The stack's config as the engine passes it: its secret keys included when they are set."""
    raw = raw_stack_config(STACK)
    raw["fsdp-eks:job"] = {**raw["fsdp-eks:job"], "model": model}
    return raw | ({TOKEN_KEY: token} if token else {})


@pytest.mark.parametrize(
    "model",
    [
        "meta-llama/Llama-2-7b-hf",
        "meta-llama/Llama-2-7b-chat-hf",
        "mistralai/Mistral-7B-v0.1",
        "llama2-7b",  # a preset of random weights whose tokenizer comes from meta-llama/Llama-2-7b-hf
    ],
)
def test_a_gated_model_without_a_token_is_refused_naming_the_key_and_the_command(model: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_stack_config(engine_raw(model), STACK, secrets_visible=True)
    (problem,) = raised.value.problems
    assert problem.startswith(f"{TOKEN_KEY}: None is not allowed")
    assert "pulumi config set --secret hfToken" in problem
    assert gated_repo(model) in problem


def test_a_gated_model_with_a_token_passes() -> None:
    config = parse_stack_config(engine_raw("meta-llama/Llama-2-7b-hf", "hf_x"), STACK, secrets_visible=True)
    assert config.job.model == "meta-llama/Llama-2-7b-hf"


@pytest.mark.parametrize(
    "model",
    ["tiny", "small", "/models/llama-2-7b", "./weights", "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "gpt2"],
)
def test_a_model_that_needs_no_token_passes_without_one(model: str) -> None:
    assert hf_token_problems(model, token_set=False) == []


def test_the_owner_of_a_hub_id_is_matched_without_regard_to_case() -> None:
    assert gated_repo("Meta-Llama/Llama-2-13b-hf") == "Meta-Llama/Llama-2-13b-hf"


def test_a_disabled_job_needs_no_token() -> None:
    raw = engine_raw("meta-llama/Llama-2-7b-hf")
    raw["fsdp-eks:job"] = {**raw["fsdp-eks:job"], "enabled": False}
    assert not parse_stack_config(raw, STACK, secrets_visible=True).job.enabled


@pytest.mark.parametrize("stack", stack_names())
def test_every_stack_file_parses_without_the_engine_which_never_sees_secrets(stack: str) -> None:
    # The render CLI, the local run and the CI summary read the file, whose secure values stay in Pulumi.
    assert parse_stack_config(raw_stack_config(stack), stack).stack == stack


def test_the_program_refuses_a_gated_model_without_a_token_before_any_resource() -> None:
    job = raw_stack_config("dev")["fsdp-eks:job"] | {"model": "meta-llama/Llama-2-7b-hf", "seqLen": 256}
    run = run_program("dev", {"fsdp-eks:job": job})
    assert run.error is not None and TOKEN_KEY in run.error["message"], run.error
    assert "pulumi config set --secret hfToken" in run.error["message"]
    assert [r for r in run.resources if not r.type.startswith("pulumi:")] == []
