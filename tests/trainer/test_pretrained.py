"""Pretrained weights: a model saved in Hugging Face format loads through the sharded path exactly as a plain
`from_pretrained` would, the exported model is the trained one, and a run that resumes from a checkpoint does not
read the pretrained weights at all."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.harness.trainer_runs import TINY, TrainerRun, run_trainer, with_flags
from trainer.base.flags.config import DataConfig
from trainer.data.packing import IGNORE_INDEX, SampleOrder, build_packed_data, step_batch
from trainer.data.tokenizer_bytes import ByteTokenizer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
SEQ_LEN, GLOBAL_BATCH, SEED = 32, 8, 7


@pytest.fixture(scope="module")
def hf_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small Llama in HF format, shaped unlike the tiny preset (vocab 300, 3 layers, odd sizes to shard)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(123)
    config = LlamaConfig(
        vocab_size=300, hidden_size=48, intermediate_size=136, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128,
    )  # fmt: skip
    directory = tmp_path_factory.mktemp("hf") / "model"
    LlamaForCausalLM(config).save_pretrained(directory)
    return directory


def pretrained_args(model_dir: Path, steps: int) -> list[str]:
    return with_flags(
        TINY, model=str(model_dir), tokenizer="byte", steps=str(steps), lr_schedule="constant", warmup_steps="0"
    )


@pytest.fixture(scope="module")
def exporting_run(hf_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[TrainerRun, Path]:
    """Two ranks load the HF model sharded, train 2 steps, save them and export the model."""
    workdir = tmp_path_factory.mktemp("export")
    args = [*pretrained_args(hf_model_dir, steps=2), "--export-hf", str(workdir / "out"), "--export-dtype", "fp32"]
    args += ["--checkpoint-dir", str(workdir / "checkpoints")]
    run = run_trainer(args, workdir, nproc=2)
    assert run.returncode == 0, run.output
    return run, workdir / "out"


def loss_of_step(model: torch.nn.Module, step: int) -> float:
    """The global batch loss of `step` (1-based) computed in one process, outside the trainer's loop."""
    data = build_packed_data(DataConfig(dataset="synthetic", seq_len=SEQ_LEN), ByteTokenizer())
    order = SampleOrder(data.num_samples, SEED)
    batch = step_batch(data, order, (step - 1) * GLOBAL_BATCH, GLOBAL_BATCH, GLOBAL_BATCH, dp_rank=0, dp_size=1)
    ((inputs, labels, positions),) = batch.micro_batches
    with torch.no_grad():  # transformers finds the packed records from the positions (find_packed_sequence_indices)
        logits = model(
            input_ids=torch.from_numpy(inputs), position_ids=torch.from_numpy(positions), use_cache=False
        ).logits
    summed = torch.nn.functional.cross_entropy(
        logits.flatten(0, 1), torch.from_numpy(labels).flatten(), ignore_index=IGNORE_INDEX, reduction="sum"
    )
    return float(summed / batch.global_target_tokens)


def from_pretrained(directory: Path) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()


def test_sharded_loading_matches_from_pretrained(
    exporting_run: tuple[TrainerRun, Path], hf_model_dir: Path, reference_run: TrainerRun
) -> None:
    run, _ = exporting_run
    expected = loss_of_step(from_pretrained(hf_model_dir), step=1)
    assert run.losses()[1] == pytest.approx(expected, rel=1e-5)
    assert abs(run.losses()[1] - reference_run.losses()[1]) > 1e-3  # not the tiny preset's random init


@pytest.fixture(scope="module")
def resumed_run(exporting_run: tuple[TrainerRun, Path], hf_model_dir: Path) -> TrainerRun:
    """One rank carries the exporting run on to step 3 from its checkpoint of step 2."""
    workdir = exporting_run[1].parent
    args = [*pretrained_args(hf_model_dir, steps=3), "--checkpoint-dir", str(workdir / "checkpoints")]
    run = run_trainer(args, workdir)
    assert run.returncode == 0, run.output
    return run


def test_the_export_is_the_trained_model(exporting_run: tuple[TrainerRun, Path], resumed_run: TrainerRun) -> None:
    """Export after 2 steps; its loss on step 3's batch equals step 3's loss in the run that carries on."""
    _, exported = exporting_run
    assert {"config.json", "generation_config.json", "model.safetensors"} <= {p.name for p in exported.iterdir()}
    assert loss_of_step(from_pretrained(exported), step=3) == pytest.approx(resumed_run.losses()[3], rel=1e-5)


def test_a_run_that_resumes_from_a_checkpoint_reads_no_pretrained_weights(
    exporting_run: tuple[TrainerRun, Path], resumed_run: TrainerRun
) -> None:
    assert "pretrained weights:" in exporting_run[0].output  # build.py's line when it reads them
    assert "pretrained weights:" not in resumed_run.output
    assert "the pretrained weights are not read" in resumed_run.output
