"""Invalid combinations are refused before any work, each message naming the flag and the value."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.harness.floor import MISSING_PACKAGES
from trainer.base.errors import InputError
from trainer.base.flags.config import parse_args
from trainer.base.model.presets import PRESETS
from trainer.base.model.source import looks_like_path, resolve_model
from trainer.base.pod.env import DistEnv
from trainer.checkpoint.layout import checkpoint_name, model_fingerprint, write_meta
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
        (["--replicate-groups", "2"], TWO_NODES_OF_FOUR, "2: only with --sharding-strategy HYBRID_SHARD (not"),
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


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--lora-rank", "-1"], "--lora-rank -1: must not be negative"),
        (
            ["--lora-rank", "8", "--lora-targets", "q_proj,lm_head"],
            "--lora-targets q_proj,lm_head: lm_head: not a decoder layer's linear layer; must name one",
        ),
        (["--lora-rank", "8", "--lora-alpha", "0"], "--lora-alpha 0: must be positive"),
        (["--lora-rank", "8", "--fp8", "--compile"], "--fp8: not with --lora-rank"),
    ],
)
def test_bad_lora_flags_are_refused(argv: list[str], expected: str) -> None:
    errors = errors_for(argv)
    assert any(expected in error for error in errors), errors


def test_a_checkpoint_resumes_only_with_the_lora_settings_it_was_saved_with(tmp_path: Path) -> None:
    checkpoint = tmp_path / checkpoint_name(3)
    checkpoint.mkdir()
    saved = parse_args(["--lora-rank", "16"]).lora.settings()
    write_meta(checkpoint, {"model": model_fingerprint(PRESETS["tiny"]), "step": 3, "lora": saved})
    same = ["--checkpoint-dir", str(tmp_path), "--lora-rank", "16", "--lora-targets", "v_proj,q_proj,k_proj,o_proj,"
            "gate_proj,up_proj,down_proj"]  # fmt: skip
    assert errors_for(same) == []  # the targets' order does not matter
    for argv, now in ((["--lora-rank", "8"], "LoRA rank 8"), ([], "full fine-tuning")):
        errors = errors_for(["--checkpoint-dir", str(tmp_path), *argv])
        assert any("saved with LoRA rank 16, alpha 32, targets down_proj,gate_proj" in e and f"uses {now}" in e
                   for e in errors), errors  # fmt: skip


UNEXPANDED = "s3://fsdp-eks-artifacts/$(STACK)/run-1"


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--artifacts-uri", UNEXPANDED], f"--artifacts-uri {UNEXPANDED}: $(STACK) was not expanded"),
        (["--artifacts-uri", "/fsx/artifacts"], "--artifacts-uri /fsx/artifacts: not an s3:// URI"),
        (["--resume-from", "/fsx/run-1/checkpoints"], "--resume-from /fsx/run-1/checkpoints: not an s3:// URI"),
        (["--resume-from", "s3://Runs/run-1/"], "--resume-from s3://Runs/run-1/: 'Runs' is not a valid S3 bucket name"),
        (
            ["--dataset", "s3://fsdp-eks-data/sets//x.jsonl", "--data-cache-dir", "/fsx/data"],
            "--dataset s3://fsdp-eks-data/sets//x.jsonl: the key has an empty path segment",
        ),
        (["--dataset", "s3://fsdp-eks-data/x.jsonl"], "--dataset s3://fsdp-eks-data/x.jsonl: needs --data-cache-dir"),
        (["--tokenizer", "s3://fsdp-eks-models/tok/"], "--tokenizer s3://fsdp-eks-models/tok/: not read from S3"),
        (
            ["--resume-from", "s3://fsdp-eks-artifacts/old/"],
            "--resume-from s3://fsdp-eks-artifacts/old/: needs --checkpoint-dir",
        ),
        (
            ["--artifacts-uri", "s3://fsdp-eks-artifacts/r"],
            "--artifacts-uri s3://fsdp-eks-artifacts/r: needs --checkpoint-dir",
        ),
        (["--s3-checkpoint-every", "-1"], "--s3-checkpoint-every -1: must not be negative"),
        (["--artifacts-uri", "s3://team.models/r"], "--artifacts-uri s3://team.models/r: 'team.models' has dots"),
        (["--resume-from", "s3://team.models/r/"], "--resume-from s3://team.models/r/: 'team.models' has dots"),
        (["--s3-checkpoint-every", "10"], "--s3-checkpoint-every 10: needs --artifacts-uri"),
        (
            ["--s3-checkpoint-every", "15", "--checkpoint-every", "10", "--artifacts-uri", "s3://fsdp-eks-artifacts/r"],
            "--s3-checkpoint-every 15: must be a multiple of --checkpoint-every 10",
        ),
    ],
)
def test_s3_flags_are_refused_naming_the_flag(argv: list[str], expected: str) -> None:
    errors = errors_for(argv)
    assert any(error.startswith(expected) for error in errors), errors


def test_s3_flags_in_their_shape_are_accepted(tmp_path: Path) -> None:
    argv = [
        "--checkpoint-dir", str(tmp_path), "--checkpoint-every", "10", "--s3-checkpoint-every", "20",
        "--artifacts-uri", "s3://fsdp-eks-artifacts/runs/dev/run-1", "--resume-from", "s3://fsdp-eks-artifacts/old/",
        "--dataset", "s3://fsdp-eks-data/sets/", "--data-cache-dir", str(tmp_path / "data"),
    ]  # fmt: skip
    assert errors_for(argv) == []


def test_an_s3_model_is_a_path_never_a_hub_id() -> None:
    """The stack's gated-model check (stack/gated_models.py) asks no token for it."""
    assert looks_like_path("s3://fsdp-eks-models/llama/") and looks_like_path("s3://fsdp-eks-models/llama")


def test_a_worker_needs_an_s3_model_staged(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--model s3://fsdp-eks-models/tiny/: needs --data-cache-dir"):
        resolve_model("s3://fsdp-eks-models/tiny/", None, offline=True)
    with pytest.raises(InputError, match=f"not staged in --data-cache-dir {tmp_path}"):
        resolve_model("s3://fsdp-eks-models/tiny/", str(tmp_path), offline=True)


def test_a_sequence_longer_than_the_models_sliding_window_is_refused(tmp_path: Path) -> None:
    """Mistral v0.1's config.json has a 4096-token window; the trainer's attention has none."""
    import json

    config = {
        "model_type": "mistral", "vocab_size": 300, "hidden_size": 32, "intermediate_size": 64,
        "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 256, "sliding_window": 64,
    }  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    argv = ["--model", str(tmp_path), "--tokenizer", "byte"]
    assert errors_for([*argv, "--seq-len", "64"]) == []
    assert errors_for([*argv, "--seq-len", "65"]) == [
        f"--seq-len 65: exceeds the model's sliding_window 64 ({tmp_path}); the trainer's attention is full causal, "
        "expected at most 64"
    ]


def test_a_missing_optional_package_is_named_only_for_the_flags_that_need_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on the lent GPU machine (tests/harness/floor.py): no S3 connector, boto3, torchao or datasets there."""
    for name in MISSING_PACKAGES:
        monkeypatch.setitem(sys.modules, name, None)  # the import system's "not found"
    assert errors_for(["--checkpoint-dir", str(tmp_path), "--checkpoint-every", "2"]) == []
    checkpoints = ["--checkpoint-dir", str(tmp_path), "--artifacts-uri", "s3://fsdp-eks-artifacts/r"]
    assert errors_for(checkpoints) == [
        "--artifacts-uri s3://fsdp-eks-artifacts/r: needs the boto3 package (reading and writing s3:// objects), "
        "which is not installed",
        "--artifacts-uri s3://fsdp-eks-artifacts/r: needs the s3torchconnector package (the checkpoints' S3 tier: "
        "the Amazon S3 Connector for PyTorch), which is not installed",
    ]
    staged = ["--dataset", "s3://fsdp-eks-data/sets/", "--data-cache-dir", str(tmp_path)]
    assert errors_for(staged) == [
        "--dataset s3://fsdp-eks-data/sets/: needs the boto3 package (reading and writing s3:// objects), which is "
        "not installed"
    ]
    assert errors_for(["--dataset", "tatsu-lab/alpaca"]) == [
        "--dataset tatsu-lab/alpaca: needs the datasets package (Hugging Face hub data sets), which is not installed"
    ]
    assert errors_for(["--fp8", "--compile"], device="cuda") == [
        "--fp8: needs the torchao package (FP8 training linears), which is not installed"
    ]
