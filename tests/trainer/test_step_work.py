"""What one training step asks of the network and of the host, counted operation by operation (tests/trainer/
step_probe.py): gradient accumulation all-reduces across replicas once per optimizer step, and a step makes the host
wait for the device only when it must (an fp16 step's overflow check); log steps read their figures afterwards."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.harness.trainer_runs import TINY, run_trainer, with_flags
from trainer.base.model.presets import PRESETS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
STEPS, LOG_EVERY = 4, 2


def probe(tmp_path: Path, nproc: int, **flags: str) -> list[dict[str, Any]]:
    output = tmp_path / "probe.jsonl"
    args = with_flags(TINY, steps=str(STEPS), log_every=str(LOG_EVERY), **flags)
    run = run_trainer(args, tmp_path, nproc=nproc, module="tests.trainer.step_probe", env={"PROBE_OUTPUT": str(output)})
    assert run.returncode == 0, run.output
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert sorted(r["rank"] for r in records) == list(range(nproc))
    assert all(len(r["steps"]) == STEPS for r in records)
    return records


@pytest.fixture(scope="module")
def hybrid_accumulating(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Two replica groups of one rank each (HYBRID_SHARD 2 x 1), three micro steps per optimizer step, bf16."""
    flags = {"sharding_strategy": "HYBRID_SHARD", "replicate_groups": "2", "batch_size": "1"}
    return probe(tmp_path_factory.mktemp("hybrid"), 2, global_batch_size="6", mixed_precision="bf16", **flags)


def test_accumulation_all_reduces_across_replicas_once_per_step(hybrid_accumulating: list[dict[str, Any]]) -> None:
    for record in hybrid_accumulating:
        for step in record["steps"]:
            # One all-reduce per unit that owns parameters, not one per unit per micro step (3 here).
            assert step["units"] >= PRESETS["tiny"].num_layers
            assert step["collectives"].get("allreduce_") == step["units"], step


def test_a_bf16_step_never_waits_for_the_device(hybrid_accumulating: list[dict[str, Any]]) -> None:
    for record in hybrid_accumulating:
        assert [step["syncs"] for step in record["steps"]] == [[]] * STEPS


def test_log_steps_read_their_figures_after_the_step(hybrid_accumulating: list[dict[str, Any]]) -> None:
    """The reporter is where loss and gradient norm reach the host: once per log step, after the step."""
    for record in hybrid_accumulating:
        assert len(record["reports"]) == STEPS // LOG_EVERY
        assert all(report["syncs"] for report in record["reports"])


def test_an_fp16_step_reads_only_the_gradient_norm(tmp_path: Path) -> None:
    """The one read a step needs: whether fp16 gradients overflowed (to skip the step on every rank alike)."""
    (record,) = probe(tmp_path, 1, mixed_precision="fp16")
    assert [step["syncs"] for step in record["steps"]] == [["_local_scalar_dense"]] * STEPS


def test_the_vocabulary_sharded_embeddings_backward_never_waits_for_the_device(tmp_path: Path) -> None:
    """A vocabulary larger than the tokens in flight on a 1-D mesh: the embedding is sharded by rows
    (trainer/parallel/embedding.py), whose backward picks each rank's own rows by arithmetic, not by a boolean mask
    (whose `nonzero` would make the host wait for the GPU every step)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=4096, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(tmp_path / "model")
    flags = {"model": str(tmp_path / "model"), "tokenizer": "byte", "seq_len": "32", "batch_size": "2"}
    records = probe(tmp_path, 2, mixed_precision="bf16", **flags)
    assert all(step["embedding_by_rows"] for record in records for step in record["steps"])
    for record in records:
        assert [step["syncs"] for step in record["steps"]] == [[]] * STEPS
