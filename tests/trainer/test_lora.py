"""LoRA through PEFT under FSDP2: the same losses on 1 and 2 ranks, a frozen base and trained adapters, checkpoints
that hold the adapters alone and resume exactly, and an export PEFT and transformers both load."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.harness.trainer_runs import TINY, TrainerRun, assert_same_losses, run_trainer, with_flags
from tests.trainer.test_master_weights import save_llama, stored_weights
from trainer.checkpoint.layout import complete_checkpoints, read_meta

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

RANK, ALPHA = 4, 8
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small pretrained Llama in fp32 (so the frozen base is compared bit for bit)."""
    return save_llama(tmp_path_factory.mktemp("base"), torch.float32)


def lora_args(base: Path, workdir: Path, **flags: str) -> list[str]:
    args = with_flags(TINY, model=str(base), tokenizer="byte", lora_rank=str(RANK), lora_alpha=str(ALPHA))
    return with_flags(args, checkpoint_dir=str(workdir / "ckpt"), export_dtype="fp32", **flags)


@pytest.fixture(scope="module")
def reference(base: Path, tmp_path_factory: pytest.TempPathFactory) -> TrainerRun:
    """LoRA, one plain process, 6 steps, never interrupted."""
    workdir = tmp_path_factory.mktemp("reference")
    run = run_trainer(lora_args(base, workdir), workdir)
    assert run.returncode == 0, run.output
    return run


def test_two_ranks_match_one_and_the_export_is_the_base_plus_the_trained_adapters(
    base: Path, reference: TrainerRun, tmp_path: Path
) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    export = tmp_path / "export"
    run = run_trainer(lora_args(base, tmp_path, export_hf=str(export)), tmp_path, nproc=2)
    assert run.returncode == 0, run.output
    assert_same_losses(run.losses(), reference.losses())

    # The frozen base did not change: every weight without an adapter is exported exactly as loaded, and every
    # adapted one is the loaded weight plus (alpha / r) B A of the exported adapter, which training moved off zero.
    loaded, merged = stored_weights(base), stored_weights(export)
    adapter = stored_weights(export / "adapter")
    assert set(merged) == set(loaded)
    assert (export / "adapter" / "adapter_config.json").is_file()
    adapted = 0
    for name, weight in loaded.items():
        module = name.removesuffix(".weight")
        a_key, b_key = f"base_model.model.{module}.lora_A.weight", f"base_model.model.{module}.lora_B.weight"
        if module.rsplit(".", 1)[-1] in TARGETS:
            adapted += 1
            assert adapter[b_key].abs().max() > 0, b_key  # B starts at zero: trained
            delta = (ALPHA / RANK) * adapter[b_key] @ adapter[a_key]
            torch.testing.assert_close(merged[name], weight + delta, rtol=0, atol=1e-6)
        else:
            assert torch.equal(merged[name], weight), name
    assert adapted == 3 * len(TARGETS) and len(adapter) == 2 * adapted

    # PEFT loads the adapter onto the base, transformers loads the merged model: the same logits, not the base's.
    tokens = torch.tensor([[5, 17, 42, 99, 3, 250, 7, 64]])
    with torch.no_grad():
        base_logits = AutoModelForCausalLM.from_pretrained(base).eval()(tokens).logits
        peft_model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), export / "adapter")
        peft_logits = peft_model.eval()(tokens).logits
        merged_logits = AutoModelForCausalLM.from_pretrained(export).eval()(tokens).logits
    torch.testing.assert_close(peft_logits, merged_logits, rtol=1e-4, atol=1e-4)
    assert (peft_logits - base_logits).abs().max() > 1e-3


def test_a_checkpoint_holds_the_adapters_and_resumes_exactly(base: Path, reference: TrainerRun, tmp_path: Path) -> None:
    import torch.distributed.checkpoint as dcp

    args = lora_args(base, tmp_path, checkpoint_every="3")
    killed = run_trainer(args, tmp_path, nproc=2, fault="kill_after_step:4")
    assert killed.returncode != 0
    [(step, checkpoint)] = complete_checkpoints(tmp_path / "ckpt")
    assert step == 3
    assert read_meta(checkpoint)["lora"] == {"rank": RANK, "alpha": ALPHA, "targets": sorted(TARGETS)}
    keys = dcp.FileSystemReader(str(checkpoint)).read_metadata().state_dict_metadata
    model_keys = [key for key in keys if key.startswith("model.")]
    assert len(model_keys) == 2 * 3 * len(TARGETS) and all(".lora_" in key for key in model_keys), model_keys
    assert any(key.startswith("optim.state.") and ".lora_A." in key for key in keys)

    full = run_trainer(with_flags(args, lora_rank="0"), tmp_path)
    assert full.returncode == 2, full.output
    assert "saved with LoRA rank 4, alpha 8, targets" in full.output and "uses full fine-tuning" in full.output

    resumed = run_trainer(args, tmp_path)
    assert resumed.returncode == 0, resumed.output
    assert [r["step"] for r in resumed.metrics] == [4, 5, 6]
    assert_same_losses({**killed.losses(), **resumed.losses()}, reference.losses())
