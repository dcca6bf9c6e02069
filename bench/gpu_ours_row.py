"""Our trainer on the GPU benchmark's work (bench/gpu_mfu.py): `trainer.train.run`, the loop `python -m trainer` runs,
in this process (a world of one).

    python bench/gpu_ours_row.py --layers 16 --seq-len 4096 --batch-size 2 --warmup-steps 3 --window-steps 5 \\
        --windows 4 --compile True --device cuda --result /tmp/ours.json

Its flags as a job would pass them: the Llama 3.1 8B shape with `--layers` layers, random initial weights, a text
file of one long record in the byte tokenizer's ids (one_long_record), bf16 compute with fp32 master weights and
AdamW (fused), FULL_SHARD on one GPU, no activation checkpointing, logging every window. Its attention is the
trainer's own (trainer/model/attention.py: flex attention over the records' mask on a GPU, here plain causal as one
record fills each block; SDPA with that mask on a CPU), with SDPA's flash kernel alone enabled. The windows are timed
around the loop's own train_step (bench/gpu_rows.py Windows), as torchtitan's row times its own.
"""

from __future__ import annotations

import argparse
import random
import string
import sys
import tempfile
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

from bench.gpu_rows import (
    RowResult,
    Windows,
    Work,
    add_work_arguments,
    attention_flops_per_token,
    attention_operators,
    compile_backend,
    peak_memory_bytes,
    pin_flash_attention,
    work_from,
)
from trainer.base.flags.config import TrainConfig, parse_args
from trainer.base.model.presets import PRESETS, ModelShape
from trainer.base.model.source import ModelSource
from trainer.base.pod.env import read_env
from trainer.validate import validate


def bench_shape(work: Work) -> ModelShape:
    """Llama 3.1 8B with `work.layers` layers; the tiny preset on a dry run."""
    if work.device == "cpu":
        return replace(PRESETS["tiny"], num_layers=work.layers)
    return replace(PRESETS["llama3.1-8b"], name=f"llama3.1-8b-{work.layers}-layers", num_layers=work.layers)


def one_long_record(work: Work, directory: Path) -> Path:
    """A text file of one record longer than every block the run reads: the trainer cuts it into pieces of --seq-len
    positions, one a block (trainer/data/blocks.py), so each block's records' mask is plain causal attention, the
    attention torchtitan's row runs. (The synthetic data set's short sentences, dozens to a block, would leave ours a
    fraction of the attention work.) Seeded random letters and spaces, never a blank line (a record's end)."""
    characters = (work.steps + 2) * work.batch_size * (work.seq_len + 1)
    generator = random.Random(7)
    path = directory / "one-record.txt"
    path.write_text("".join(generator.choices(string.ascii_lowercase + " ", k=characters)))
    return path


def bench_config(work: Work, dataset: Path) -> TrainConfig:
    argv = ["--tokenizer", "byte", "--dataset", str(dataset), "--seq-len", str(work.seq_len),
            "--batch-size", str(work.batch_size), "--global-batch-size", str(work.batch_size),
            "--steps", str(work.steps), "--log-every", str(work.window_steps), "--lr", "1e-5",
            "--warmup-steps", "1", "--device", work.device, "--mixed-precision", "bf16",
            "--sharding-strategy", "FULL_SHARD", "--activation-checkpointing", "none"]  # fmt: skip
    return parse_args([*argv, *(["--compile"] if work.compile else [])])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_work_arguments(parser)
    parser.add_argument("--result", type=Path, required=True)
    work = work_from(args := parser.parse_args())
    pin_flash_attention()
    if compile_backend(work) != "inductor":  # a dry run: apply_compile's layer.compile calls torch.compile
        torch.compile = partial(torch.compile, backend=compile_backend(work))
    scratch = Path(tempfile.mkdtemp(prefix="gpu-ours-row-"))
    shape, config, env = bench_shape(work), bench_config(work, one_long_record(work, scratch)), read_env()
    source = ModelSource(kind="preset", name=shape.name, shape=shape)
    errors = validate(config, env, work.device, source)
    if errors:
        raise SystemExit("\n".join(errors))
    import trainer.train as loop

    windows, seen = Windows(work), {}
    step = loop.train_step

    def timed_step(state: Any, *step_args: Any, **step_kwargs: Any) -> Any:
        seen.setdefault("model", state.model)
        if windows.steps == work.warmup_steps - 1:  # the last untimed step, compiled by now
            result: list[Any] = []
            seen["attention"] = attention_operators(
                lambda: result.append(step(state, *step_args, **step_kwargs)), work.device
            )
        else:
            result = [step(state, *step_args, **step_kwargs)]
        windows.step_done()
        return result[0]

    loop.train_step = timed_step
    loop.run(config, env, source, work.device)
    model = seen["model"]
    parameters = sum(p.numel() for p in model.parameters())
    RowResult(
        trainer="ours (python -m trainer)",
        compile=work.compile,
        tokens_per_step=work.tokens_per_step * env.world_size,
        window_seconds=windows.seconds,
        window_steps=work.window_steps,
        parameters=parameters,
        matmul_parameters=parameters - model.get_input_embeddings().weight.numel(),
        attention_flops_per_token=attention_flops_per_token(work.layers, shape.q_width, work.seq_len),
        peak_memory_bytes=peak_memory_bytes(work.device),
        attention=seen.get("attention", "not read"),
    ).write(args.result)


if __name__ == "__main__":
    main()
