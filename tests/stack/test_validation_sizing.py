"""The sizing counts evaluation: one evaluation of the held-out set is the forward FLOPs of its tokens (2N + 4LHT a
token) on every rank's share, with the all-gathers FSDP2 runs for a forward; a run's time adds each evaluation to its
steps, and jobSizing says how many held-out tokens it timed and where that figure came from."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sizing.catalog import CATALOG
from sizing.estimate import Validation, held_out_tokens, make_job, run_time, size_job
from sizing.fsx import KEEP_CHECKPOINTS
from sizing.memory import adapter_parameters
from sizing.throughput import Assumptions, estimate_evaluation
from stack.config import ValidationSettings
from stack.files import load_stack_config
from stack.fit import sizing_summary, stack_run_time, stack_sizing, stack_storage
from trainer.base.flags.config import parse_args
from trainer.base.model.presets import find_shape

P5 = CATALOG["p5.48xlarge"]
MFU = Assumptions(mfu=0.4)
LLAMA2_7B = find_shape("meta-llama/Llama-2-7b-hf")
SEQ = 4096


def llama7b(strategy: str = "FULL_SHARD", nodes: int = 1, lora_rank: int = 0):
    assert LLAMA2_7B is not None
    return make_job(
        LLAMA2_7B,
        parse_args(
            ["--seq-len", str(SEQ), "--batch-size", "1", "--sharding-strategy", strategy, "--lora-rank", str(lora_rank)]
        ),
        gpus=nodes * P5.gpus,
    )


def forward_seconds(lora_rank: int = 0) -> float:
    """One micro batch's forward by hand: 2 FLOPs per multiply-add over the untied output layer and the layers' weights,
    4LHT of attention, 2A more for LoRA's adapters, at the assumed 40% of an H100's dense bf16 peak."""
    shape = LLAMA2_7B
    assert shape is not None and not shape.tie_word_embeddings
    matmul = shape.num_parameters - shape.vocab_size * shape.hidden_size  # the input embedding is a lookup
    adapters = adapter_parameters(shape, lora_rank, llama7b().lora_targets)
    flops = 2 * matmul + 4 * shape.num_layers * shape.q_width * SEQ + 2 * adapters
    return SEQ * flops / (P5.peak_bf16_flops_per_gpu * 0.4)


def test_an_evaluation_is_the_forward_compute_of_every_ranks_share_and_a_little_communication() -> None:
    held_out = 10 * P5.gpus * SEQ  # ten sequences per GPU
    evaluation = estimate_evaluation(llama7b(), P5, 1, held_out, MFU)
    assert evaluation.forwards == 10
    # NVLink gathers a 7B layer well within its forward: only the overlap cost and the root's gather show.
    assert 10 * forward_seconds() < evaluation.evaluation_s < 1.05 * 10 * forward_seconds()


def test_lora_adds_its_adapters_forward_to_an_evaluation() -> None:
    full, lora = (estimate_evaluation(llama7b(lora_rank=r), P5, 1, P5.gpus * SEQ, MFU) for r in (0, 16))
    assert lora.forward_s - full.forward_s == pytest.approx(forward_seconds(16) - forward_seconds(0), rel=0.05)


def test_a_share_that_does_not_divide_evenly_costs_every_rank_one_more_forward() -> None:
    """FSDP2 needs every rank to run the same forwards: one sequence past an even share is a round for all."""
    even, one_more = (
        estimate_evaluation(llama7b(), P5, 1, t, MFU) for t in (4 * P5.gpus * SEQ, (4 * P5.gpus + 1) * SEQ)
    )
    assert (even.forwards, one_more.forwards) == (4, 5)
    assert one_more.evaluation_s == pytest.approx(5 / 4 * even.evaluation_s)


def test_full_shard_gathers_every_forward_and_shard_grad_op_once_an_evaluation() -> None:
    """SHARD_GRAD_OP keeps the gathered parameters until a backward, which an evaluation never runs."""
    tokens = 4 * 2 * P5.gpus * SEQ
    full = [estimate_evaluation(llama7b("FULL_SHARD", 2), P5, 2, n * tokens, MFU) for n in (1, 2)]
    once = [estimate_evaluation(llama7b("SHARD_GRAD_OP", 2), P5, 2, n * tokens, MFU) for n in (1, 2)]
    assert full[1].evaluation_s == pytest.approx(2 * full[0].evaluation_s)
    assert once[1].evaluation_s - once[0].evaluation_s == pytest.approx(once[0].forwards * once[0].forward_s)
    assert once[0].evaluation_s > once[0].forwards * once[0].forward_s  # the one gather
    assert once[1].evaluation_s < full[1].evaluation_s


@pytest.mark.parametrize(("steps", "every", "evaluations"), [(500, 50, 10), (105, 50, 3), (500, 0, 1), (40, 50, 1)])
def test_a_run_evaluates_at_every_multiple_of_every_and_at_its_last_step(
    steps: int, every: int, evaluations: int
) -> None:
    assert Validation(steps=steps, every=every, split=0.1).evaluations == evaluations


def test_the_held_out_tokens_are_the_split_of_the_data_set_or_an_assumption_said_as_such() -> None:
    assert held_out_tokens(Validation(steps=1, split=0.1, dataset_tokens=5_000_000), 10**9) == (
        500_000,
        "split x the data set's tokens",
    )
    tokens, basis = held_out_tokens(Validation(steps=1, split=0.2), 8_000_000)
    assert tokens == 2_000_000 and basis.startswith("assumed: the run makes one pass over the data set")
    tokens, basis = held_out_tokens(Validation(steps=1, separate_dataset=True), 12_460_000)
    assert tokens == 500_000 and basis == "assumed: 4% of the tokens the run trains"


def test_a_job_with_validation_runs_longer_by_its_evaluations() -> None:
    sizing = size_job(llama7b(), P5, 1, MFU)
    plain = run_time(sizing, Validation(steps=1000), MFU)
    validated = run_time(sizing, Validation(steps=1000, every=100, split=0.02), MFU)
    assert plain is not None and validated is not None and validated.evaluation is not None
    trained = 1000 * P5.gpus * SEQ
    assert validated.evaluation.held_out_tokens == round(0.02 / 0.98 * trained)
    one = estimate_evaluation(sizing.job, P5, 1, validated.evaluation.held_out_tokens, MFU)
    assert validated.run_s - plain.run_s == pytest.approx(10 * one.evaluation_s)
    # The held-out tokens are 2% of the trained ones, evaluated 10 times at a third of a training token's FLOPs.
    assert validated.run_s / plain.run_s - 1 == pytest.approx(10 * 0.02 / 0.98 / 3, rel=0.15)


def test_the_lora_stacks_job_sizing_times_its_evaluations() -> None:
    config = load_stack_config("p5-1-llama70b-lora")
    assert config.job.validation.split > 0 and config.job.validation.every > 0
    summary, time, sizing = sizing_summary(config), stack_run_time(config), stack_sizing(config)
    assert summary is not None and time is not None and sizing is not None and sizing.throughput is not None
    evaluation = summary["time"]["evaluation"]
    assert evaluation["evaluations"] == config.job.steps // config.job.validation.every
    assert evaluation["heldOutTokensFrom"].startswith("assumed:")
    assert summary["time"]["stepTimeS"] == round(sizing.throughput.step_s, 3)
    expected_hours = (config.job.steps * sizing.throughput.step_s + time.evaluation_s) / 3600
    assert summary["time"]["runHours"] == round(expected_hours, 2)
    assert summary["time"]["stepTimeWithEvaluationS"] > summary["time"]["stepTimeS"]


def test_a_stack_without_validation_has_no_evaluation_time() -> None:
    summary = sizing_summary(load_stack_config("p5-16"))
    assert summary is not None and summary["time"]["evaluation"] is None
    assert summary["time"]["stepTimeWithEvaluationS"] == summary["time"]["stepTimeS"]


def test_keep_best_counts_one_more_checkpoint_on_the_file_system() -> None:
    """The best checkpoint stays beside the newest --keep-checkpoints whatever its age: the FSx sizing holds it."""
    config = load_stack_config("p5-1-llama70b-lora")
    assert config.job.validation.keep_best
    kept = stack_storage(config)
    without = stack_storage(replace(config, job=replace(config.job, validation=ValidationSettings(split=0.02))))
    assert kept is not None and without is not None
    assert (kept.keep, without.keep) == (KEEP_CHECKPOINTS + 1, KEEP_CHECKPOINTS)
    assert kept.needed_bytes - without.needed_bytes == kept.checkpoint_bytes
