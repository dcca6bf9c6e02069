"""The top of a torch.profiler profile of our trainer's training steps on rank 0 (the work of bench/vs_torchtitan.py).

    .venv/bin/python -m torch.distributed.run --standalone --nproc-per-node 2 bench/profile_ours.py
    bench/.torchtitan-venv/bin/python -m torch.distributed.run --standalone --nproc-per-node 2 \\
        bench/torchtitan_run.py --profile --result /tmp/titan.json                    # the same for torchtitan

Runs `python -m trainer` in-process with the benchmark's flags and profiles `--steps` steps after `--warmup`
(operators by self CPU time, and the step's phases as record_function ranges).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

import torch

import trainer.train
from trainer.main import main as trainer_main


def bench_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3, help="profiled steps")
    parser.add_argument("--rows", type=int, default=20)
    parser.add_argument("--trace", type=Path, help="also write each rank's wall-clock trace with memory events to "
                        "TRACE.<rank>.json (chrome://tracing, Perfetto): both ranks side by side")  # fmt: skip
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = bench_args(argv)
    total = args.warmup + args.steps
    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=bool(args.trace))
    inner = trainer.train.train_step
    calls = [0]

    # The train step's own arguments and result, passed through unchanged.
    def profiled_step(*step_args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == args.warmup + 1:
            profiler.start()
        with torch.profiler.record_function("train_step"):
            result = inner(*step_args, **kwargs)
        if calls[0] == total:
            profiler.stop()
            if args.trace:
                profiler.export_chrome_trace(f"{args.trace}.{os.environ.get('RANK', '0')}.json")
        return result

    trainer.train.train_step = profiled_step
    flags = ["--model", "small", "--tokenizer", "byte", "--device", "cpu", "--mixed-precision", "fp32",
             "--sharding-strategy", "FULL_SHARD", "--seq-len", "128", "--batch-size", "2", "--global-batch-size", "4",
             "--steps", str(total), "--log-every", str(total), "--lr", "1e-4", "--weight-decay", "0",
             "--grad-clip", "1.0"]  # fmt: skip
    status = trainer_main(flags)
    if torch.distributed.is_initialized() is False and status == 0 and os.environ.get("RANK", "0") == "0":
        print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))
    sys.exit(status)


if __name__ == "__main__":
    main()
