"""`pulumi preview` refuses a job whose model is a gated Hugging Face repository when the stack names no Secrets
Manager secret holding the token, naming the key and the commands that create and name the secret
(stack/gated_models.py); a model that needs no token passes, and so does every stack file read without the engine
(render, local run, CI summary), which never needs the secret."""

from __future__ import annotations

from typing import Any

import pytest

from stack.fields import ConfigError
from stack.files import raw_stack_config, stack_names
from stack.gated_models import gated_repo, hf_token_problems
from stack.parse import parse_stack_config
from tests.harness.pulumi_program import run_program

SECRET_KEY = "fsdp-eks:job.hfTokenSecret"
STACK = "p5-1"  # one p5.48xlarge: a 7B model fits, so the token's secret is the only problem


def engine_raw(model: str, secret: str | None = None) -> dict[str, Any]:
    """The stack's config as the engine passes it, with `model` and `secret` (None: no secret named)."""
    raw = raw_stack_config(STACK)
    job = {key: value for key, value in raw["fsdp-eks:job"].items() if key != "hfTokenSecret"}
    raw["fsdp-eks:job"] = job | {"model": model} | ({"hfTokenSecret": secret} if secret else {})
    return raw


@pytest.mark.parametrize(
    "model",
    [
        "meta-llama/Llama-2-7b-hf",
        "meta-llama/Llama-2-7b-chat-hf",
        "mistralai/Mistral-7B-v0.1",
        "llama2-7b",  # a preset of random weights whose tokenizer comes from meta-llama/Llama-2-7b-hf
    ],
)
def test_a_gated_model_without_a_secret_is_refused_naming_the_key_and_the_commands(model: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_stack_config(engine_raw(model), STACK, secrets_visible=True)
    (problem,) = raised.value.problems
    assert problem.startswith(f"{SECRET_KEY}: None is not allowed")
    assert "aws secretsmanager create-secret --name fsdp-eks/hf-token --secret-string hf_..." in problem
    assert f"pulumi config set --path {SECRET_KEY} fsdp-eks/hf-token" in problem
    repo = gated_repo(model)
    assert repo and repo in problem


def test_a_gated_model_with_a_secret_passes() -> None:
    config = parse_stack_config(
        engine_raw("meta-llama/Llama-2-7b-hf", "fsdp-eks/hf-token"), STACK, secrets_visible=True
    )
    assert config.job.hf_token_secret == "fsdp-eks/hf-token"


@pytest.mark.parametrize(
    "model",
    ["tiny", "small", "/models/llama-2-7b", "./weights", "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "gpt2"],
)
def test_a_model_that_needs_no_token_passes_without_a_secret(model: str) -> None:
    assert hf_token_problems(model, token_secret=None) == []


def test_the_owner_of_a_hub_id_is_matched_without_regard_to_case() -> None:
    assert gated_repo("Meta-Llama/Llama-2-13b-hf") == "Meta-Llama/Llama-2-13b-hf"


def test_a_disabled_job_needs_no_secret() -> None:
    raw = engine_raw("meta-llama/Llama-2-7b-hf")
    raw["fsdp-eks:job"] = {**raw["fsdp-eks:job"], "enabled": False}
    assert not parse_stack_config(raw, STACK, secrets_visible=True).job.enabled


def test_a_stack_file_read_without_the_engine_needs_no_secret() -> None:
    # The render CLI and the local run (which passes this machine's HF_TOKEN through) never call Secrets Manager.
    assert parse_stack_config(engine_raw("meta-llama/Llama-2-7b-hf"), STACK).job.hf_token_secret is None


@pytest.mark.parametrize("stack", stack_names())
def test_every_shipped_stack_with_a_gated_model_names_the_secret(stack: str) -> None:
    config = parse_stack_config(raw_stack_config(stack), stack, secrets_visible=True)
    assert (config.job.hf_token_secret is not None) == (gated_repo(config.job.model) is not None)


@pytest.mark.program
def test_the_program_refuses_a_gated_model_without_a_secret_before_any_resource() -> None:
    job = raw_stack_config("dev")["fsdp-eks:job"] | {"model": "meta-llama/Llama-2-7b-hf", "seqLen": 256}
    run = run_program("dev", {"fsdp-eks:job": job})
    assert run.error is not None and SECRET_KEY in run.error["message"], run.error
    assert "aws secretsmanager create-secret" in run.error["message"]
    assert [r for r in run.resources if not r.type.startswith("pulumi:")] == []
