"""Checkpoint storage in the sizing: what a checkpoint takes, the FSx for Lustre size that holds keep + 1 of them, what
a save takes at the configured throughput, and a preview that fails when the stack's file system is too small."""

from __future__ import annotations

import json

import pytest

from sizing.cli import main
from sizing.fsx import estimate_storage, fsx_capacity_for
from sizing.memory import adapter_parameters
from stack.fields import ConfigError
from stack.files import load_stack_config
from stack.fit import sizing_summary, stack_storage
from stack.parse import parse_stack_config
from tests.harness.pulumi_program import run_program
from trainer.base.flags.config import LORA_TARGETS
from trainer.base.model.presets import PRESETS, find_shape
from trainer.base.units import GIB

# A 70B job that fits the GPUs' memory on 16 p5 nodes: only its storage is in question here.
JOB_70B = {
    "model": "meta-llama/Llama-2-70b-hf", "shardingStrategy": "FULL_SHARD", "activationCheckpointing": "full",
    "seqLen": 4096, "batchSize": 1, "globalBatchSize": 128,
}  # fmt: skip
P5_16 = {"instanceType": "p5.48xlarge", "count": 16, "availabilityZone": "us-east-1a"}


def config_70b(storage: dict | None = None):
    raw = {"aws:region": "us-east-1", "fsdp-eks:job": JOB_70B, "fsdp-eks:gpuNodes": P5_16}
    return parse_stack_config({**raw, **({"fsdp-eks:storage": storage} if storage else {})}, "big")


def test_a_checkpoint_is_twelve_bytes_per_parameter() -> None:
    """fp32 master weights and AdamW's two fp32 moments, whatever the compute dtype."""
    for name, gib in (("llama2-7b", 75.3), ("llama2-13b", 145.5), ("llama2-70b", 770.9)):
        estimate = estimate_storage(PRESETS[name], pretrained=False)
        assert estimate.checkpoint_bytes == 12 * PRESETS[name].num_parameters
        assert round(estimate.checkpoint_bytes / GIB, 1) == gib


def test_a_lora_checkpoint_is_twelve_bytes_per_adapter_parameter() -> None:
    """Only the adapters and their moments (the base comes from --model again); the export is the merged model and the
    fp32 adapter."""
    shape = PRESETS["llama3.1-70b"]
    adapters = adapter_parameters(shape, 16, LORA_TARGETS)
    assert adapters == 80 * 16 * (2 * (8192 + 8192) + 2 * (8192 + 1024) + 3 * (8192 + 28672))  # q,o; k,v; MLP
    estimate = estimate_storage(shape, pretrained=True, lora_rank=16)
    assert estimate.checkpoint_bytes == 12 * adapters
    assert round(estimate.checkpoint_bytes / GIB, 1) == 2.3  # against 788.5 GiB for full fine-tuning
    assert estimate.export_bytes == 2 * shape.num_parameters + 4 * adapters


def test_the_file_system_holds_keep_plus_one_checkpoints_the_staged_weights_and_the_export() -> None:
    estimate = estimate_storage(PRESETS["llama2-70b"], pretrained=True)
    params = PRESETS["llama2-70b"].num_parameters
    assert estimate.keep == 3
    assert estimate.needed_bytes == 4 * 12 * params + 2 * params + 2 * params
    assert estimate.needed_capacity_gib == 4800  # 3340.5 GiB, in PERSISTENT_2's 2400 GiB steps


def test_fsx_sizes_come_in_1200_and_steps_of_2400() -> None:
    assert [fsx_capacity_for(gib * GIB) for gib in (1, 1200, 1201, 2400, 2401, 4800)] == [
        1200, 1200, 2400, 2400, 4800, 4800,
    ]  # fmt: skip


def test_a_save_takes_the_checkpoint_over_the_baseline_throughput() -> None:
    """1200 GiB at 250 MB/s/TiB is 293 MB/s: a 70B checkpoint takes 47 minutes, a 7B one 4.6."""
    big = estimate_storage(PRESETS["llama2-70b"], pretrained=False, capacity_gib=1200, per_tib=250)
    assert big.throughput_bytes_per_s == pytest.approx(1200 / 1024 * 250e6)
    assert big.save_s / 60 == pytest.approx(47.1, abs=0.1)
    small = estimate_storage(PRESETS["llama2-7b"], pretrained=False, capacity_gib=1200, per_tib=250)
    assert small.save_s / 60 == pytest.approx(4.6, abs=0.1)
    assert small.load_s == small.save_s  # read once, whatever the replicas (trainer/checkpoint/load.py)


def test_the_checkpoint_timeout_follows_the_save_time() -> None:
    slow = estimate_storage(PRESETS["llama2-70b"], pretrained=True, capacity_gib=4800, per_tib=250)
    assert slow.timeout_minutes() == 36  # 3 x 11.8 min
    fast = estimate_storage(PRESETS["llama2-7b"], pretrained=True, capacity_gib=1200, per_tib=1000)
    assert fast.timeout_minutes() == 30  # never below the trainer's default


def test_a_70b_stack_with_the_default_fsx_fails_naming_what_it_needs_and_what_it_has() -> None:
    with pytest.raises(ConfigError) as error:
        config_70b()
    [problem] = error.value.problems
    assert problem.startswith("fsdp-eks:storage.fsxCapacityGiB: 1200 is too small for meta-llama/Llama-2-70b-hf")
    assert "one is 770.9 GiB" in problem and "4 x 770.9 GiB = 3083.5 GiB" in problem
    assert "3340.5 GiB needed; expected 4800 or more" in problem


@pytest.mark.program
def test_a_70b_stack_fails_preview_under_the_mocks() -> None:
    """The program as `pulumi preview` runs it: the config error comes before any resource is registered."""
    run = run_program("p5-16", {"fsdp-eks:job": JOB_70B})
    assert run.error is not None and run.error["kind"] == "ConfigError", run.error
    assert "fsxCapacityGiB: 1200 is too small" in run.error["message"]
    assert "3340.5 GiB needed; expected 4800" in run.error["message"]
    assert run.resources == []


@pytest.mark.program
def test_a_70b_stack_with_room_reports_its_storage_in_the_outputs() -> None:
    run = run_program("p5-16", {"fsdp-eks:job": JOB_70B, "fsdp-eks:storage": {"fsxCapacityGiB": 4800}})
    assert run.error is None, run.error
    storage = run.outputs["jobSizing"]["storage"]
    assert storage["checkpointGiB"] == 770.9 and storage["storageNeededGiB"] == 3340.5
    assert storage["fsxCapacityGiB"] == storage["fsxCapacityNeededGiB"] == 4800
    assert storage["checkpointSaveMinutes"] == 11.8 and storage["checkpointTimeoutMinutes"] == 36
    assert storage["fsxCostPerHour"] == pytest.approx(4800 * 0.210 / 730, abs=0.01)


def test_every_fsx_stack_reports_storage_and_the_dev_stack_has_none() -> None:
    for stack in ("p5-1", "p5-16", "p4de-16"):
        summary = sizing_summary(load_stack_config(stack))
        assert summary is not None
        storage = summary["storage"]
        assert storage["checkpointGiB"] == 75.3 and storage["fsxCapacityGiB"] >= storage["fsxCapacityNeededGiB"]
        assert storage["checkpointWaitSecondsPerHour"] == 0  # background saves that never queue
    dev = sizing_summary(load_stack_config("dev"))
    assert dev is not None and dev["storage"] is None  # an emptyDir: the trainer checks it


def test_a_claim_of_the_users_own_is_not_sized() -> None:
    config = parse_stack_config(
        {"aws:region": "us-east-1", "fsdp-eks:gpuNodes": P5_16, "fsdp-eks:job": {**JOB_70B, "checkpointClaim": "mine"}},
        "big",
    )
    assert stack_storage(config) is None


def test_the_sizing_table_has_the_storage_lines(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--model", "meta-llama/Llama-2-70b-hf", "--instance", "p5.48xlarge", "--nodes", "16", "--strategy",
            "FULL_SHARD", "--activation-checkpointing", "full", "--fsx-capacity-gib", "1200", "--checkpoint-every",
            "100"]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "Checkpoints: 770.9 GiB each" in out and "= 3340.5 GiB: FSx for Lustre of 4800 GiB or more" in out
    assert "On 1200 GiB at 250 MB/s/TiB (293 MB/s, $0.35/h, TOO SMALL): a save takes 47.1 min" in out
    assert "Saving in the background every 100 steps of" in out and "min of every hour for saves (none from" in out


def test_the_sizing_json_has_storage_and_defaults_to_the_size_that_holds_it(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--model", "llama2-70b", "--instance", "p5.48xlarge", "--nodes", "16", "--strategy", "FULL_SHARD",
            "--activation-checkpointing", "full", "--fsx-throughput-per-tib", "1000", "--json"]  # fmt: skip
    assert main(args) == 0
    [row] = json.loads(capsys.readouterr().out)
    storage = row["storage"]
    assert storage["fsxCapacityGiB"] == storage["fsxCapacityNeededGiB"] == 4800  # a preset: no staged weights
    assert storage["storageNeededGiB"] == 3212.0 and storage["fsxThroughputMBps"] == 4688
    assert storage["checkpointSaveMinutes"] == 2.9


def test_an_invalid_fsx_capacity_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["--model", "llama2-7b", "--instance", "p5.48xlarge", "--nodes", "1", "--fsx-capacity-gib", "2000"]) == 2
    )
    assert "--fsx-capacity-gib 2000 is not allowed; expected 1200 or a multiple of 2400" in capsys.readouterr().err


def test_the_storage_table_in_the_docs_is_what_the_sizing_computes() -> None:
    from tests.sizing.test_sizing_docs import doc_table

    for row in doc_table("storage-check"):
        shape = find_shape(row["hub model"])
        assert shape is not None, row["hub model"]
        needed = estimate_storage(shape, pretrained=True)
        small = estimate_storage(shape, pretrained=True, capacity_gib=1200)
        sized = estimate_storage(shape, pretrained=True, capacity_gib=needed.needed_capacity_gib)
        assert row["checkpoint"] == f"{needed.checkpoint_bytes / GIB:.1f} GiB"
        assert row["keep 3 + 1 + staged + export"] == f"{needed.needed_bytes / GIB:.1f} GiB"
        assert row["FSx size needed"] == f"{needed.needed_capacity_gib} GiB"
        assert row["save at 1200 GiB x 250"] == f"{small.save_s / 60:.1f} min"
        assert row["at the size needed x 250"].startswith(f"{sized.save_s / 60:.1f} min")
