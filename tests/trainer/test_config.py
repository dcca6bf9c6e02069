"""The command line: parsed into the typed config tree, documented, and readable without torch."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from tests.harness.trainer_runs import ROOT, trainer_env
from trainer.base.flags.config import TrainConfig, build_parser, parse_args, to_argv
from trainer.base.flags.options import options, sections


def test_defaults_parse_into_the_config_tree() -> None:
    config = parse_args([])
    assert config == TrainConfig()
    assert config.model.name == "tiny"
    assert config.parallel.sharding_strategy == "FULL_SHARD"


def test_flags_land_in_their_fields() -> None:
    config = parse_args(
        ["--model", "meta-llama/Llama-2-7b-hf", "--sharding-strategy", "HYBRID_SHARD", "--replicate-groups", "2",
         "--seq-len", "4096", "--global-batch-size", "64", "--lr", "2e-5", "--compile", "--metrics-port", "9300",
         "--checkpoint-dir", "/ckpt", "--peak-tflops", "989"]
    )  # fmt: skip
    assert config.model.name == "meta-llama/Llama-2-7b-hf"
    assert (config.parallel.sharding_strategy, config.parallel.replicate_groups) == ("HYBRID_SHARD", 2)
    assert (config.data.seq_len, config.schedule.global_batch_size) == (4096, 64)
    assert config.optim.lr == pytest.approx(2e-5)
    assert config.parallel.compile is True
    assert (config.metrics.port, config.checkpoint.directory, config.metrics.peak_tflops) == (9300, "/ckpt", 989.0)


def test_every_field_has_a_flag_and_a_docstring() -> None:
    declared = options(TrainConfig)
    assert len(declared) == sum(len(dataclasses.fields(cls)) for _, cls in sections(TrainConfig))
    for option in declared:
        assert option.flag.startswith("--"), option.path
        assert option.doc, f"{option.path} has no docstring"


def test_to_argv_round_trips() -> None:
    argv = ["--model", "small", "--fp8", "--steps", "7", "--min-lr", "1e-05", "--dataset-format", "dialogsum"]
    config = parse_args(argv)
    assert parse_args(to_argv(config)) == config


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--sharding-strategy", "ZERO3"], "--sharding-strategy"),
        (["--mixed-precision", "int4"], "--mixed-precision"),
        (["--steps", "many"], "--steps"),
        (["--no-such-flag"], "--no-such-flag"),
    ],
)
def test_unknown_values_exit_with_status_2_naming_the_flag(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    assert flag in capsys.readouterr().err


def test_help_lists_every_flag() -> None:
    text = build_parser().format_help()
    for flag in ("--sharding-strategy", "--replicate-groups", "--export-hf", "--metrics-host", "--peak-tflops"):
        assert flag in text


def test_parser_metrics_and_presets_import_without_torch() -> None:
    code = (
        "import sys, trainer.base.flags.config, trainer.base.metrics.figures, trainer.base.model.presets;"
        "import trainer.base.hardware.chips;"
        "import trainer.validate;"
        "import trainer.main;"
        "trainer.base.flags.config.parse_args(['--model', 'llama2-7b']);"
        "heavy = [m for m in ('torch', 'numpy', 'transformers') if m in sys.modules];"
        "assert not heavy, heavy"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=trainer_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_help_runs_as_a_module() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trainer", "--help"], cwd=ROOT, env=trainer_env(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "--global-batch-size" in done.stdout
