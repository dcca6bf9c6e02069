"""Bad inputs fail before training: a message naming the flag and the value, a non-zero exit, no checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness.trainer_runs import TINY, run_trainer, with_flags
from trainer.base.pod.env import DistEnv
from trainer.base.pod.exits import EXIT_BAD_INPUT
from trainer.checkpoint.layout import complete_checkpoints
from trainer.main import refuse

pytestmark = pytest.mark.timeout(200)


def refused(args: list[str], tmp_path: Path, nproc: int = 1) -> str:
    """Run, expect a refusal before any work, and return the output."""
    checkpoints = tmp_path / "ckpt"
    run = run_trainer(with_flags(args, checkpoint_dir=str(checkpoints)), tmp_path, nproc=nproc)
    assert run.returncode != 0, run.output
    assert "step 1/" not in run.output and not run.metrics
    assert not checkpoints.exists() or not any(checkpoints.iterdir())
    return run.output


@pytest.mark.parametrize(
    "flags, message",
    [
        ({"dataset": "/no/such/data.jsonl"}, "--dataset /no/such/data.jsonl: no such file"),
        ({"sharding_strategy": "ZERO3"}, "--sharding-strategy: invalid choice: 'ZERO3'"),
        ({"seq_len": "1024"}, "--seq-len 1024: exceeds the model's max_position_embeddings 512"),
        ({"global_batch_size": "7"}, "--global-batch-size 7: not a multiple of --batch-size x the world size (2 x 1"),
        ({"model": "no-such-preset"}, "--model no-such-preset: not a preset"),
    ],
)
def test_refused_with_a_message(flags: dict[str, str], message: str, tmp_path: Path) -> None:
    output = refused(with_flags(TINY, **flags), tmp_path)
    assert message in output


def test_fp8_on_cpu_is_refused(tmp_path: Path) -> None:
    assert "--fp8: needs a CUDA GPU" in refused([*TINY, "--fp8"], tmp_path)


def test_a_dataset_in_an_unknown_format_is_refused_before_training(tmp_path: Path) -> None:
    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"question": "why?", "answer": "because"}) + "\n")
    assert "cannot tell the format from the fields ['answer', 'question']" in refused(
        with_flags(TINY, dataset=str(data)), tmp_path
    )


@pytest.mark.slow
def test_a_hybrid_mesh_that_does_not_divide_the_world_is_refused_on_every_rank(tmp_path: Path) -> None:
    args = with_flags(TINY, sharding_strategy="HYBRID_SHARD", replicate_groups="3")
    assert "--replicate-groups 3 does not divide the world size 2" in refused(args, tmp_path, nproc=2)


def test_a_rank_other_than_the_first_says_why_it_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    # torchrun stops rank 0 as soon as rank 1 exits: a refusal rank 0 alone printed was lost whenever rank 1 was first.
    assert refuse(["--seq-len 1024: too long"], DistEnv(rank=3, world_size=8)) == EXIT_BAD_INPUT
    assert refuse(["--seq-len 1024: too long"], DistEnv(rank=0, world_size=8)) == EXIT_BAD_INPUT
    assert capsys.readouterr().err.splitlines() == [
        "python -m trainer: error: --seq-len 1024: too long (rank 3)",
        "python -m trainer: error: --seq-len 1024: too long",
    ]


@pytest.mark.slow
def test_a_checkpoint_from_an_incompatible_model_is_refused_and_kept(tmp_path: Path) -> None:
    directory = tmp_path / "ckpt"
    first = run_trainer(with_flags(TINY, steps="1", warmup_steps="0", checkpoint_dir=str(directory)), tmp_path)
    assert first.returncode == 0, first.output
    ((step, checkpoint),) = complete_checkpoints(directory)
    before = sorted(p.name for p in checkpoint.iterdir())

    other_model = tmp_path / "other"
    other_model.mkdir()
    config = {"vocab_size": 260, "hidden_size": 48, "intermediate_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512}  # fmt: skip
    (other_model / "config.json").write_text(json.dumps({"model_type": "llama", **config}))
    run = run_trainer(with_flags(TINY, model=str(other_model), checkpoint_dir=str(directory)), tmp_path)
    assert run.returncode == 2
    assert f"--checkpoint-dir {directory}: checkpoint step_00000001 is from an incompatible model" in run.output
    assert "hidden_size 64 != 48" in run.output
    assert [s for s, _ in complete_checkpoints(directory)] == [step]
    assert sorted(p.name for p in checkpoint.iterdir()) == before
