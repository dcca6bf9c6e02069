"""Invalid combinations are refused before any work, each message naming the flag and the value."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer.checkpoint.layout import checkpoint_name, model_fingerprint, write_meta
from trainer.config import parse_args
from trainer.env import DistEnv
from trainer.model.presets import PRESETS
from trainer.model.source import resolve_model
from trainer.validate import validate

TWO_NODES_OF_FOUR = DistEnv(rank=0, world_size=8, local_rank=0, local_world_size=4)


def errors_for(argv: list[str], env: DistEnv | None = None, device: str = "cpu") -> list[str]:
    config = parse_args(argv)
    return validate(config, env or DistEnv(), device, resolve_model(config.model.name))


def test_a_valid_run_has_no_errors() -> None:
    assert errors_for(["--global-batch-size", "16", "--batch-size", "2"], TWO_NODES_OF_FOUR) == []


@pytest.mark.parametrize(
    "argv, env, expected",
    [
        (["--global-batch-size", "12", "--batch-size", "2"], TWO_NODES_OF_FOUR, "--global-batch-size 12"),
        (["--sharding-strategy", "HYBRID_SHARD", "--replicate-groups", "3"], TWO_NODES_OF_FOUR, "--replicate-groups 3"),
        (["--replicate-groups", "2"], TWO_NODES_OF_FOUR, "only applies to --sharding-strategy HYBRID_SHARD"),
        (["--seq-len", "513"], DistEnv(), "--seq-len 513: exceeds the model's max_position_embeddings 512"),
        (["--fp8"], DistEnv(), "--fp8"),
        (["--dataset", "/no/such/file.jsonl"], DistEnv(), "--dataset /no/such/file.jsonl: no such file"),
        (["--lr-schedule", "constant", "--min-lr", "1e-5"], DistEnv(), "--min-lr 1e-05"),
        (["--steps", "0"], DistEnv(), "--steps 0: must be positive"),
        (["--warmup-steps", "20", "--steps", "10"], DistEnv(), "--warmup-steps 20"),
        (["--checkpoint-every", "5"], DistEnv(), "--checkpoint-every 5: needs --checkpoint-dir"),
    ],
)
def test_invalid_combinations_name_the_flag(argv: list[str], env: DistEnv, expected: str) -> None:
    errors = errors_for(argv, env)
    assert any(expected in error for error in errors), errors


def test_hybrid_shard_defaults_to_one_group_per_node() -> None:
    uneven = DistEnv(rank=0, world_size=6, local_world_size=4)
    assert errors_for(["--sharding-strategy", "HYBRID_SHARD", "--global-batch-size", "16"], TWO_NODES_OF_FOUR) == []
    assert any("LOCAL_WORLD_SIZE" in e for e in errors_for(["--sharding-strategy", "HYBRID_SHARD"], uneven))


def test_cuda_requested_without_a_gpu_is_refused() -> None:
    assert any("--device cuda" in e for e in errors_for(["--device", "cuda"], device="unavailable"))


def test_a_checkpoint_of_another_model_is_refused(tmp_path: Path) -> None:
    checkpoint = tmp_path / checkpoint_name(3)
    checkpoint.mkdir()
    write_meta(checkpoint, {"model": model_fingerprint(PRESETS["small"]), "step": 3})
    errors = errors_for(["--checkpoint-dir", str(tmp_path)])
    assert any("incompatible model" in e and "hidden_size 768 != 64" in e for e in errors), errors


def test_a_checkpoint_of_the_same_model_is_accepted_and_tmp_dirs_are_ignored(tmp_path: Path) -> None:
    checkpoint = tmp_path / checkpoint_name(3)
    checkpoint.mkdir()
    write_meta(checkpoint, {"model": model_fingerprint(PRESETS["tiny"]), "step": 3})
    (tmp_path / (checkpoint_name(4) + ".tmp")).mkdir()  # a crashed save of another model would not matter
    assert errors_for(["--checkpoint-dir", str(tmp_path)]) == []
