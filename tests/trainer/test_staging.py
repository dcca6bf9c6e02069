"""Inputs prepared once per job: the data set tokenised by one rank (or by `python -m trainer.stage`) and mapped by
every rank, and a hub model's files staged so that the workers run with the hub offline (HF_HUB_OFFLINE=1, which
tests/harness/trainer_runs.py sets for every run). tests/trainer/data_probe.py reports how each rank got its data."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.trainer_runs import ROOT, TINY, TrainerRun, assert_same_losses, run_trainer, trainer_env, with_flags

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
HUB_REPO = "fsdp-eks-test/tiny-llama"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
DIALOGUES = [
    {"dialogue": f"#Person1#: Is {a} plus {b} {a + b}?\n#Person2#: Yes, it is.", "summary": f"{a}+{b}={a + b}."}
    for a in range(20)
    for b in range(10)
]


def probed(args: list[str], tmp_path: Path, nproc: int, env: dict[str, str] | None = None) -> tuple[TrainerRun, list]:
    output = tmp_path / f"probe-{len(list(tmp_path.glob('probe-*')))}.jsonl"
    run = run_trainer(
        args, tmp_path, nproc=nproc, module="tests.trainer.data_probe", env={"PROBE_OUTPUT": str(output), **(env or {})}
    )
    records = [json.loads(line) for line in output.read_text().splitlines()] if output.exists() else []
    return run, sorted(records, key=lambda r: r["rank"])


def test_rank_0_tokenises_once_and_every_rank_maps_it(reference_run: TrainerRun, tmp_path: Path) -> None:
    args = with_flags(TINY, data_cache_dir=str(tmp_path / "data"))
    run, records = probed(args, tmp_path, nproc=2)
    assert run.returncode == 0, run.output
    assert [(r["rank"], r["tokenised"], r["memory_mapped"]) for r in records] == [(0, 1, True), (1, 0, True)]
    assert_same_losses(run.losses(), reference_run.losses())  # the mapped stream is the tokenised one

    again, records = probed(args, tmp_path, nproc=2)
    assert again.returncode == 0, again.output
    assert [(r["tokenised"], r["memory_mapped"]) for r in records] == [(0, True), (0, True)]  # found in the cache


def test_a_refused_data_set_fails_every_rank_alike(tmp_path: Path) -> None:
    """Rank 0 finds the format unknown; rank 1, waiting for the tokenised data, gets the same refusal."""
    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"question": "why?", "answer": "because"}) + "\n")
    run = run_trainer(with_flags(TINY, dataset=str(data), data_cache_dir=str(tmp_path / "data")), tmp_path, nproc=2)
    assert run.returncode != 0
    said = [line for line in run.output.splitlines() if "cannot tell the format" in line]
    # Each rank says it once; torchrun may stop rank 1 before it gets to (it stops a worker's peers when one exits).
    assert said and len(said) == len(set(said)) <= 2, run.output
    assert {line.removesuffix(" (rank 1)") for line in said} == {
        "python -m trainer: error: --dataset-format auto: cannot tell the format from the fields ['answer', 'question']"
    }, run.output
    assert "error_file" in run.output and "TimeoutError" not in run.output


def hub_cache(hf_home: Path, tmp_path: Path) -> None:
    """A model in the Hugging Face cache as huggingface_hub lays it out (HF_HOME/hub/models--<org>--<name>, a refs/main
    file naming the commit, the files under snapshots/<commit>/), as if `trainer.stage` had downloaded it."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    repo = hf_home / "hub" / f"models--{HUB_REPO.replace('/', '--')}"
    snapshot = repo / "snapshots" / COMMIT
    torch.manual_seed(123)
    config = LlamaConfig(
        vocab_size=300, hidden_size=48, intermediate_size=136, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, dtype="float16",
    )  # fmt: skip
    # transformers wraps PreTrainedModel.to in a decorator whose type drops the bound self.
    LlamaForCausalLM(config).to(torch.float16).save_pretrained(snapshot)  # pyright: ignore[reportArgumentType]
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)


def staged_args(tmp_path: Path) -> list[str]:
    data = tmp_path / "dialogues.jsonl"
    data.write_text("".join(json.dumps(record) + "\n" for record in DIALOGUES))
    return with_flags(
        TINY, model=HUB_REPO, tokenizer="byte", dataset=str(data), data_cache_dir=str(tmp_path / "data"), steps="3"
    )


def stage(args: list[str], hf_home: Path) -> subprocess.CompletedProcess[str]:
    env = {**trainer_env(), "HF_HOME": str(hf_home)}
    return subprocess.run(
        [sys.executable, "-m", "trainer.stage", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_after_staging_the_workers_run_with_the_hub_offline(tmp_path: Path) -> None:
    hf_home = tmp_path / "hf"
    hub_cache(hf_home, tmp_path)
    args = staged_args(tmp_path)
    staged = stage(args, hf_home)
    assert staged.returncode == 0, staged.stderr
    assert "tokenised" in staged.stderr and (tmp_path / "data" / ".staged.json").is_file()
    again = stage(args, hf_home)
    assert again.returncode == 0 and "already staged" in again.stderr  # the other pods' launchers

    run, records = probed(args, tmp_path, nproc=2, env={"HF_HOME": str(hf_home)})
    assert run.returncode == 0, run.output
    assert [(r["tokenised"], r["memory_mapped"]) for r in records] == [(0, True), (0, True)]
    assert sorted(run.losses()) == [1, 2, 3]


def test_without_staging_an_offline_worker_says_what_is_missing(tmp_path: Path) -> None:
    run, _ = probed(staged_args(tmp_path), tmp_path, nproc=1, env={"HF_HOME": str(tmp_path / "empty")})
    assert run.returncode == 2
    assert f"--model {HUB_REPO}: cannot fetch config.json from the Hugging Face hub" in run.output
