"""The job's trainer, its sizing and the policy pack see one object: the trainer's own TrainConfig that the stack's
job.* settings choose."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stack import fit
from stack.files import load_stack_config, stack_names
from stack.trainer_config import stack_trainer_config
from trainer.base.flags.config import parse_args
from workloads.job.pod import trainer_args
from workloads.job.spec import job_spec


@pytest.mark.parametrize("stack", stack_names())
def test_the_pods_trainer_config_is_the_stacks_with_the_pods_layout_only(stack: str) -> None:
    config = load_stack_config(stack)
    assert config.job.enabled  # every shipped stack runs a job
    chosen, spec = stack_trainer_config(config.job), job_spec(config)
    parsed = parse_args(trainer_args(spec))
    for section in ("model", "parallel", "optim", "schedule"):
        ours, theirs = getattr(chosen, section), getattr(parsed, section)
        for field in ("name", "sharding_strategy", "mixed_precision", "activation_checkpointing", "lr", "steps",
                      "batch_size", "global_batch_size"):  # fmt: skip
            if hasattr(ours, field):
                assert getattr(theirs, field) == getattr(ours, field), (section, field)
    assert parsed.data.seq_len == chosen.data.seq_len and parsed.data.dataset == chosen.data.dataset


def test_the_sizing_sizes_the_trainer_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """A change to the object the trainer runs with is a change to what the sizing sizes."""
    config = load_stack_config("p5-16")
    before = fit.stack_sizing(config)
    chosen = stack_trainer_config(config.job)
    shorter = replace(chosen, data=replace(chosen.data, seq_len=chosen.data.seq_len // 2))
    monkeypatch.setattr(fit, "stack_trainer_config", lambda job: shorter)
    after = fit.stack_sizing(config)
    assert before is not None and after is not None
    assert after.job.seq_len == chosen.data.seq_len // 2 != before.job.seq_len


def test_the_lora_stack_runs_the_trainer_with_lora() -> None:
    config = load_stack_config("p5-1-llama70b-lora")
    parsed = parse_args(trainer_args(job_spec(config)))
    assert (parsed.lora.rank, parsed.lora.alpha, parsed.lora.target_list()) == (16, 32, config.job.lora.targets)
    assert parsed.model.name == "meta-llama/Llama-3.1-70B"
    assert parsed.parallel.activation_checkpointing == "selective-mm"


def test_job_lora_is_a_map_of_its_own_keys_checked_one_by_one() -> None:
    """job.lora nests in the job section as the issue's users write it: each key parsed, checked and named with its
    path; an unknown key is refused with the allowed ones; absent keys keep the trainer's defaults."""
    from stack.fields import ConfigError
    from stack.files import raw_stack_config
    from stack.parse import parse_stack_config

    def parse(lora: object) -> object:
        raw = raw_stack_config("dev")
        raw["fsdp-eks:job"] = {**raw.get("fsdp-eks:job", {}), "lora": lora}
        return parse_stack_config(raw, "dev")

    job = parse({"rank": 8}).job  # type: ignore[attr-defined]
    assert (job.lora.rank, job.lora.alpha, job.lora.targets[0]) == (8, 32, "q_proj")
    assert parse('{"rank": 4, "targets": ["q_proj"]}').job.lora.targets == ["q_proj"]  # type: ignore[attr-defined]
    with pytest.raises(ConfigError) as refused:
        parse({"rank": -1, "targets": ["lm_head"], "dropout": 0.1})
    problems = refused.value.problems
    assert "fsdp-eks:job.lora.dropout: unknown key; allowed keys are alpha, rank, targets" in problems
    assert "fsdp-eks:job.lora.rank: -1 is not allowed; expected a number >= 0" in problems
    assert any(p.startswith("fsdp-eks:job.lora.targets: ['lm_head'] is not allowed") for p in problems)
    with pytest.raises(ConfigError, match=r"fsdp-eks:job.lora: 16 is not allowed; expected a map of settings"):
        parse(16)


@pytest.mark.parametrize("data_format", ["instruction", "chat"])
def test_job_dataset_format_is_the_pods_dataset_format_flag(data_format: str) -> None:
    from stack.files import raw_stack_config
    from stack.parse import parse_stack_config

    raw = raw_stack_config("p5-2")
    raw["fsdp-eks:job"] = {**raw["fsdp-eks:job"], "datasetFormat": data_format}
    parsed = parse_args(trainer_args(job_spec(parse_stack_config(raw, "p5-2"))))
    assert parsed.data.dataset_format == data_format


def test_an_unknown_dataset_format_is_refused_with_the_trainers_choices() -> None:
    from stack.fields import ConfigError
    from stack.files import raw_stack_config
    from stack.parse import parse_stack_config

    raw = raw_stack_config("p5-2")
    raw["fsdp-eks:job"] = {**raw["fsdp-eks:job"], "datasetFormat": "alpaca"}
    with pytest.raises(ConfigError, match=r"job\.datasetFormat: 'alpaca' is not allowed.*instruction"):
        parse_stack_config(raw, "p5-2")
